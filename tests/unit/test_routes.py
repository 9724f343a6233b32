"""The route table (``tokenwire.endpoints.routes``): one table that both servers, the HTTP layer and the README read."""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator

import httpx
import pytest
from support.apps.routes import EXTENDED
from support.asgi import Uvicorn, read_stream, uvicorn
from support.docs import all_text
from support.live import declared, raw, read_to_end, request, serving, split_response

from tokenwire.core.model import ANSWER
from tokenwire.endpoints.config import MAX_CHAT_BODY_BYTES
from tokenwire.endpoints.params import RequestError
from tokenwire.endpoints.routes import LIVE_ROUTES, Route, RouteTable
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


def test_every_body_limit_is_settable_by_its_setting_name() -> None:
    table = EXTENDED.with_limits({"max_body_bytes": 2048, "max_v2_body_bytes": 1})
    # /chat and OpenAI's two POST routes take a conversation: max_chat_body_bytes.
    assert [route.body_limit for route in table.routes if route.takes_body] == [2048, *[MAX_CHAT_BODY_BYTES] * 3, 1]
    with pytest.raises(ValueError, match=r"^no route's body is limited by 'max_chat_bytes'; the settings are "
                                         r"\['max_body_bytes', 'max_chat_body_bytes', 'max_v2_body_bytes'\]$"):
        EXTENDED.with_limits({"max_chat_bytes": 1})
    with pytest.raises(ValueError, match=r"^max_body_bytes must be a non-negative int, got -1$"):
        LIVE_ROUTES.with_limits({"max_body_bytes": -1})


def test_a_table_refuses_routes_it_could_not_serve() -> None:
    with pytest.raises(ValueError, match="each pattern is one route"):
        LIVE_ROUTES.add(Route("/streams", ("GET",), "events", "read"))
    with pytest.raises(ValueError,
                       match=r"^a route's action must be one of \('create', 'read', 'stop', 'scrape'\), got 'x'$"):
        Route("/x", ("GET",), "events", "x")  # type: ignore[arg-type]
    from tokenwire.endpoints.config import LiveConfig
    from tokenwire.endpoints.decide import Endpoints
    from tokenwire.endpoints.registry import Registry
    with pytest.raises(ValueError, match=r"^no handler answers a route of kind 'teleport'"):
        Endpoints(Registry(), LiveConfig(), routes=RouteTable((Route("/x", ("GET",), "teleport", "read"),)))


def test_the_404_lists_the_tables_routes() -> None:
    with pytest.raises(RequestError) as caught:
        LIVE_ROUTES.find("/nowhere", "GET", alone=True)
    assert caught.value.message == ("no such path '/nowhere': the routes here are "
                                    + ", ".join(route.described() for route in LIVE_ROUTES.routes[:-1])
                                    + f" and {LIVE_ROUTES.routes[-1].described()}")


def test_the_readmes_route_table_is_the_tables() -> None:
    """Each route of the table is a row of the README's endpoint table, with its summary; no other live row."""
    rows = dict(re.findall(r"^\| `([A-Z/]+ /[^`?]*)(?:\?[^`]*)?` \| (.*) \|$", all_text(), re.M))
    for route in LIVE_ROUTES.routes:
        assert rows.get(route.described()) == route.summary, route.described()
    live = {name for name in rows if name.split(" ")[1].startswith(("/stream", "/chat", "/metrics", "/v1/"))}
    assert live == {route.described() for route in LIVE_ROUTES.routes}
