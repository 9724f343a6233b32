"""One HTTP rule on both servers (issue 22, item 7): a declared body length of any number of digits, and
percent-encoded paths.  ``tokenwire serve`` on both event loops; uvicorn with each of its HTTP parsers."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import httpx
import pytest
from asgi_helpers import Uvicorn, read_stream, uvicorn
from live_helpers import declared, raw, read_to_end, serving, split_response

from tokenwire.endpoints.routes import LIVE_ROUTES

# A declared length and the 413's message: 10 digits (past what was checked before), 19 (under 2**64),
# 20 and 100 (past any parser's integer).
DECLARED = {
    "10 digits": ("1000000000", "request body of 1000000000 bytes; at most 1024 are read"),
    "19 digits": ("9" * 19, f"request body of {'9' * 19} bytes; at most 1024 are read"),
    "20 digits": ("9" * 20, f"request body of {'9' * 20} bytes; at most 1024 are read"),
    "100 digits": ("0" * 5 + "9" * 100, "request body of a 100-digit number of bytes; at most 1024 are read"),
}
MALFORMED = ["12a", "-1", "1 2", "0x10"]


@pytest.fixture(scope="module", params=["httptools", "h11"])
def asgi(request: pytest.FixtureRequest) -> Iterator[Uvicorn]:
    with uvicorn("tokenwire.asgi:app", http=request.param) as server:
        yield server


def _raw_uvicorn(server: Uvicorn, data: bytes) -> tuple[int, dict[str, str], bytes]:
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(data)
        return split_response(read_to_end(sock, 10))


@pytest.mark.parametrize("case", DECLARED)
def test_serve_refuses_a_declared_length_of_any_digits_with_413_before_reading(loop_kind: str, case: str) -> None:
    length, message = DECLARED[case]
    with serving() as server:
        status, headers, body = split_response(raw(server, declared("POST", "/streams?tokens=3", length)))
    assert (status, json.loads(body)) == (413, {"error": message})
    assert headers["content-type"] == "application/json"


@pytest.mark.parametrize("case", DECLARED)
def test_uvicorn_refuses_a_declared_length_of_any_digits_before_reading(asgi: Uvicorn, case: str) -> None:
    length, message = DECLARED[case]
    status, _, body = _raw_uvicorn(asgi, declared("POST", "/streams?tokens=3", length))
    if int(length) >= 2**64 if asgi.http == "httptools" else len(length) > 20:
        assert status == 400             # past what uvicorn's parser holds: it refuses first (README)
    else:
        assert (status, json.loads(body)) == (413, {"error": message})


@pytest.mark.parametrize("value", MALFORMED)
def test_a_malformed_content_length_is_400_on_both_servers(loop_kind: str, asgi: Uvicorn, value: str) -> None:
    with serving() as server:
        status, _, body = split_response(raw(server, declared("POST", "/streams?tokens=3", value)))
    assert (status, json.loads(body)) == (400, {"error": f"Content-Length {value!r} is not a number of bytes"})
    assert _raw_uvicorn(asgi, declared("POST", "/streams?tokens=3", value))[0] == 400   # the server's parser


# (method, target, the 400's message): paths with two spellings; {id} is a finished stream's id.
TWO_SPELLINGS = [
    ("GET", "/strea%6D?tokens=3", "the path '/strea%6D' percent-encodes 'm' as '%6D'; send it as itself"),
    ("GET", "/streams/{id}%2Fevents", "the path '/streams/{id}%2Fevents' percent-encodes '/' as '%2F'; "
                                      "send it as itself"),
    ("GET", "/streams/{id}%2fevents", "the path '/streams/{id}%2fevents' percent-encodes '/' as '%2f'; "
                                      "send it as itself"),
    ("GET", "/streams/{id}/even%74s", "the path '/streams/{id}/even%74s' percent-encodes 't' as '%74'; "
                                      "send it as itself"),
    ("POST", "/%73treams?tokens=3", "the path '/%73treams' percent-encodes 's' as '%73'; send it as itself"),
    ("GET", "/stream%7E", "the path '/stream%7E' percent-encodes '~' as '%7E'; send it as itself"),
    ("PUT", "/%2Fstream", "the path '/%2Fstream' percent-encodes '/' as '%2F'; send it as itself"),
]


def _finished(base: str) -> str:
    made = httpx.post(f"{base}/streams?tokens=3&producer_ms=0.1")
    stream_id = str(made.json()["stream_id"])
    assert read_stream(f"{base}/streams/{stream_id}/events").ids == [0, 1, 2]
    return stream_id


def test_a_path_with_two_spellings_is_refused_alike_by_both_servers(loop_kind: str, asgi: Uvicorn) -> None:
    with serving() as server, httpx.Client(timeout=10) as client:
        ours, theirs = _finished(asgi.url), _finished(server.url)
        for method, target, message in TWO_SPELLINGS:
            a = _raw_uvicorn(asgi, f"{method} {target.format(id=ours)} HTTP/1.1\r\nHost: x\r\nConnection: close"
                                   f"\r\nContent-Length: 0\r\n\r\n".encode())
            b = client.request(method, server.url + target.format(id=theirs))
            assert (a[0], json.loads(a[2])) == (400, {"error": message.format(id=ours)}), (asgi.http, target)
            assert (b.status_code, b.json()) == (400, {"error": message.format(id=theirs)}), target
            assert a[1]["content-type"] == b.headers["content-type"] == "application/json"


def test_a_path_decoded_once_routes_alike_on_both_servers(loop_kind: str, asgi: Uvicorn) -> None:
    """Other escapes are decoded once, then routed: ``%2541`` is ``%41``, never ``A``."""
    with serving() as server, httpx.Client(timeout=10) as client:
        for base in (asgi.url, server.url):
            read = read_stream(f"{base}/stream?tokens=2&producer_ms=0.1")       # the plain spelling is served
            assert read.ids == [0, 1]
        a = client.get(f"{asgi.url}/streams/x%2541/events")
        assert (a.status_code, a.json()) == (404, {"error": "no such path '/streams/x%41/events': the routes here "
                                                            f"are {LIVE_ROUTES.described()}"})


def test_serve_answers_expect_100_continue_on_a_body_route_before_the_body(loop_kind: str) -> None:
    # It sent nothing until the body came: a client that waits for the 100 (curl waits a second) stalled.
    body = json.dumps({"messages": [], "tokens": 2, "producer_ms": 0.01}).encode()
    with serving() as server, socket.create_connection(server.address, timeout=10) as sock:
        sock.sendall(b"POST /chat HTTP/1.1\r\nHost: x\r\nConnection: close\r\nExpect: 100-continue\r\n"
                     b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body))
        assert sock.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"      # before any byte of the body is sent
        sock.sendall(body)
        status, headers, answer = split_response(read_to_end(sock, 10))
    assert status == 200 and headers["x-vercel-ai-ui-message-stream"] == "v1"
    assert answer.endswith(b"data: [DONE]\n\n")
