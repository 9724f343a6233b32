"""Routes added to the table (``support.apps.routes``) served by both servers: ``tokenwire serve`` in this process and
the ASGI app under uvicorn, with the same answers and refusals byte for byte, a stream made on one route read on
another, and a body judged by its own route's limit before it is read.  (The table itself: ``unit/test_routes.py``.)
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import httpx
import pytest
from support.apps.routes import EXTENDED
from support.asgi import Uvicorn, read_stream, uvicorn
from support.live import declared, raw, read_to_end, request, serving, split_response

from tokenwire.core.model import ANSWER
from tokenwire.endpoints.params import RequestError
from tokenwire.live.server import LiveServer

HEADERS = ("content-type", "cache-control", "x-content-type-options", "referrer-policy", "allow", "retry-after")


@pytest.fixture(scope="module")
def asgi() -> Iterator[Uvicorn]:
    with uvicorn("support.apps.routes:app") as server:
        yield server


@pytest.fixture(scope="module")
def serve() -> Iterator[LiveServer]:
    with serving(routes=EXTENDED) as server:
        yield server


# (method, target, headers, body): each is asked of both servers serving EXTENDED.
ADDED_CASES = [
    ("GET", "/v2/streams", {}, None),                                   # 405, Allow: POST, PUT
    ("DELETE", "/v2/streams/abc/events", {}, None),                     # 405 in OpenAI's format
    ("GET", "/v2/streams/unknownstream/events", {}, None),              # 404 in OpenAI's format
    ("POST", "/v2/streams?tokens=3", {}, b"x" * 17),                    # 413: its own limit, 16
    ("PUT", "/v2/streams?tokens=0", {}, b"x" * 16),                     # 400: the query, at the limit
    ("POST", "/v2/streams?tokens=3", {"Transfer-Encoding": "chunked"}, None),   # 411
    ("POST", "/v2/streams?tokens=3", {"Content-Length": "9" * 19}, None),  # 413 before a byte is read
    ("POST", "/streams?tokens=3", {}, b"x" * 17),                       # 201: /streams keeps 1 KiB
]


def _ask_uvicorn(client: httpx.Client, base: str, method: str, target: str, headers: dict[str, str],
                 body: bytes | None) -> tuple[int, dict[str, str], bytes]:
    if "Content-Length" in headers:          # httpx would send its own: say it by hand
        with socket.create_connection(("127.0.0.1", int(base.rsplit(":", 1)[1])), timeout=10) as sock:
            sock.sendall(declared(method, target, headers["Content-Length"]))
            return split_response(read_to_end(sock, 10))
    content = iter([b"a", b"b"]) if headers.get("Transfer-Encoding") == "chunked" else body
    response = client.request(method, base + target, content=content,
                              headers={k: v for k, v in headers.items() if k != "Transfer-Encoding"})
    return response.status_code, dict(response.headers), response.content


def _ask_serve(server: LiveServer, method: str, target: str, headers: dict[str, str],
               body: bytes | None) -> tuple[int, dict[str, str], bytes]:
    if "Content-Length" in headers:
        return split_response(raw(server, declared(method, target, headers["Content-Length"])))
    if headers.get("Transfer-Encoding") == "chunked":
        return split_response(raw(server, f"{method} {target} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked"
                                          "\r\n\r\n1\r\na\r\n0\r\n\r\n".encode()))
    return request(server, method, target, headers, body)


def test_a_route_added_to_the_table_is_served_by_both_servers_with_the_same_refusals(asgi: Uvicorn,
                                                                                      serve: LiveServer) -> None:
    with httpx.Client(timeout=10) as client:
        for method, target, headers, body in ADDED_CASES:
            ours = _ask_uvicorn(client, asgi.url, method, target, headers, body)
            theirs = _ask_serve(serve, method, target, headers, body)
            assert ours[0] == theirs[0], (method, target, ours, theirs)
            if ours[0] != 201:
                assert ours[2] == theirs[2], (method, target)         # the same bytes
            for name in HEADERS:
                assert ours[1].get(name) == theirs[1].get(name), (method, target, name)
    assert asgi.stderr() == ""


def test_the_added_routes_answer_as_the_table_says(serve: LiveServer) -> None:
    status, headers, body = _ask_serve(serve, "GET", "/v2/streams", {}, None)
    assert (status, headers["allow"]) == (405, "POST, PUT")
    assert json.loads(body) == {"error": "'/v2/streams' does not take GET; it takes POST, PUT"}
    status, _, body = _ask_serve(serve, "POST", "/v2/streams?tokens=3", {}, b"x" * 17)
    assert (status, json.loads(body)) == (413, {"error": "request body of 17 bytes; at most 16 are read"})
    status, _, body = _ask_serve(serve, "POST", "/v2/streams?tokens=3", {"Transfer-Encoding": "chunked"}, None)
    assert (status, json.loads(body)) == (411, {"error": "send the body with its Content-Length; chunked bodies "
                                                         "are refused"})     # its parameters are not the query's
    status, _, body = _ask_serve(serve, "GET", "/v2/streams/unknownstream/events", {}, None)
    assert status == 404 and json.loads(body)["error"]["type"] == "not_found_error"
    assert set(json.loads(body)["error"]) == {"message", "type", "code"}


def test_a_stream_made_on_an_added_route_is_read_on_another_on_both_servers(asgi: Uvicorn,
                                                                             serve: LiveServer) -> None:
    for base in (asgi.url, serve.url):
        made = httpx.put(f"{base}/v2/streams?tokens=4&producer_ms=0.1", content=b"x" * 16)
        assert made.status_code == 201, made.text
        stream_id = made.json()["stream_id"]
        read = read_stream(f"{base}/v2/streams/{stream_id}/events")
        assert read.ids == [0, 1, 2, 3] and read.text == "".join(ANSWER[:4])


def test_a_body_is_judged_before_it_is_read_by_its_route_alone(serve: LiveServer) -> None:
    """``Route.check_body`` is the one judge: the endpoints ask it, and so does serve's HTTP layer (which made up a
    request to ask the endpoints' check before), with the raw header values."""
    route = EXTENDED.body_route("/v2/streams", "PUT")
    assert route is not None and route.body_limit == 16

    def judged(coding: list[str], lengths: list[str]) -> tuple[int, str] | None:
        try:
            route.check_body(coding, lengths)
        except RequestError as exc:
            return exc.status, exc.message
        return None

    assert judged([], []) is None and judged([], ["16"]) is None and judged([], ["16", "16"]) is None
    assert judged([], ["0017"]) == (413, "request body of 17 bytes; at most 16 are read")
    assert judged(["chunked"], []) == (411, "send the body with its Content-Length; chunked bodies are refused")
    assert judged(["gzip"], []) == (501, "Transfer-Encoding 'gzip' is not supported; send the body with its "
                                         "Content-Length")
    assert judged(["chunked"], ["16"]) == (400, "Transfer-Encoding 'chunked' and Content-Length '16' both given; "
                                                "send one of them")
    assert judged([], ["5", "05"]) == (400, "Content-Length given 2 times, as '5' and '05'; send it once")
    assert judged([], ["5, 5"]) == (400, "Content-Length '5, 5' is not a number of bytes")
    status, _, body = split_response(raw(serve, b"PUT /v2/streams HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
                                                b"Content-Length: 05\r\n\r\n"))
    assert (status, json.loads(body)) == (400, {"error": "Content-Length given 2 times, as '5' and '05'; send it once"})
