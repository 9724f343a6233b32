"""The HTTP layer (``tokenwire/live/http.py``) over loopback sockets: h11's strictness, this server's own limits
on a request's head and body (each with its own status), unknown methods, and the one request deadline, which a
request trickled in a byte at a time does not extend.

Every server binds 127.0.0.1 port 0 and runs in this process; every client has a timeout.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest
from support.live import (
    SERVER_NAME,
    TIMEOUT_S,
    raw,
    read_to_end,
    request,
    serving,
    split_response,
    still_open,
)

from tokenwire.endpoints.config import MAX_HEADER_BYTES, MAX_REQUEST_LINE
from tokenwire.live.server import LiveServer


@pytest.fixture(scope="module")
def server() -> Iterator[LiveServer]:
    with serving() as live:
        yield live


# -- strict HTTP: h11's RemoteProtocolError is a 400 at once, on both loops -----------------------------------
STRICT = {
    "a bare CR in a header": b"GET / HTTP/1.1\r\nHost: x\r\nX-A: a\rb\r\n\r\n",
    "a NUL in a header": b"GET / HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n",
    "two different Content-Lengths": b"POST /streams HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n"
                                     b"Content-Length: 2\r\n\r\nab",
    "an HTTP/0.9 request line": b"GET /\r\n",
    "no Host on HTTP/1.1": b"GET / HTTP/1.1\r\n\r\n",
    "a space before the colon": b"GET / HTTP/1.1\r\nHost : x\r\n\r\n",
}


@pytest.mark.parametrize("case", STRICT)
def test_strict_http_is_a_400_at_once(case: str, loop_kind: str) -> None:
    with serving(request_timeout_s=30) as server:      # an answer must not wait for a deadline
        status, headers, body = split_response(raw(server, STRICT[case], timeout_s=5))
    assert status == 400 and headers["connection"] == "close", (case, body)


# -- this server's limits on the request: a status each ---------------------------------------------------
def test_request_line_and_header_limits() -> None:
    with serving() as server:
        long_line = request(server, "GET", "/live?x=" + "a" * MAX_REQUEST_LINE)
        many = {f"X-Pad-{i}": "v" * 1000 for i in range(MAX_HEADER_BYTES // 1000 + 1)}
        big_headers = request(server, "GET", "/live", headers=many)
    assert long_line[0] == 414
    assert big_headers[0] == 431


OVERSIZED = {
    "request line past ours": (b"GET /?x=" + b"a" * MAX_REQUEST_LINE + b" HTTP/1.1\r\n\r\n", 414),
    "request line past the stdlib's": (b"GET /?x=" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n", 414),
    "headers past ours": (b"GET / HTTP/1.1\r\n" + b"".join(b"X-%d: %s\r\n" % (i, b"v" * 1000)
                                                            for i in range(MAX_HEADER_BYTES // 1000 + 1))
                          + b"\r\n", 431),
    "one header line past the stdlib's": (b"GET / HTTP/1.1\r\nX: " + b"a" * 70_000 + b"\r\n\r\n", 431),
    "more than 100 headers": (b"GET / HTTP/1.1\r\n" + b"".join(b"X-%d: a\r\n" % i for i in range(101))
                              + b"\r\n", 431),
    "a body past MAX_BODY_BYTES": (b"POST /streams HTTP/1.1\r\nContent-Length: 5000\r\n\r\n" + b"x" * 5000, 413),
    "a chunked body": (b"POST /streams HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 411),
    "a bad Content-Length": (b"POST /streams HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400),
    "a 10,000-digit Content-Length": (b"POST /streams HTTP/1.1\r\nContent-Length: " + b"9" * 10_000
                                      + b"\r\n\r\n", 413),        # past the limit, however many digits
    "a bad HTTP version": (b"GET / HTTP/1.x\r\n\r\n", 400),
    "an HTTP/0.9 request": (b"GET /live\r\n\r\n", 400),
    "one word": (b"GARBAGE\r\n\r\n", 400),
}


@pytest.mark.parametrize("case", OVERSIZED)
def test_oversized_and_malformed_requests_are_refused_with_a_status(server: LiveServer, case: str) -> None:
    data, expected = OVERSIZED[case]
    status, headers, body = split_response(raw(server, data))
    assert status == expected, (case, status, body[:200])
    assert headers["server"] == SERVER_NAME and headers["x-content-type-options"] == "nosniff"
    assert len(body) < 600


@pytest.mark.parametrize("method", ["BREW", "TRACE", "CONNECT", "get"])
def test_an_unknown_method_is_501_with_the_security_headers(server: LiveServer, method: str) -> None:
    status, headers, body = split_response(raw(server, f"{method} / HTTP/1.1\r\nHost: x\r\n\r\n".encode()))
    assert status == 501 and headers["content-type"] == "text/plain; charset=utf-8"
    assert headers["x-content-type-options"] == "nosniff" and headers["server"] == SERVER_NAME
    assert b"<" not in body


# -- the request deadline: from the connection's start, not restarted by a byte -----------------------------
def test_idle_connections_end_at_the_request_deadline() -> None:
    with serving(request_timeout_s=0.3) as server:
        sock = socket.create_connection(server.address, timeout=TIMEOUT_S)
        assert read_to_end(sock) == b""          # closed, nothing said
        sock.close()
        assert request(server, "GET", "/live")[0] == 200


def test_a_client_that_sends_nothing_is_disconnected() -> None:
    with serving(request_timeout_s=0.2) as server:
        sock = socket.create_connection(server.server_address[:2], timeout=TIMEOUT_S)
        try:
            assert sock.recv(1024) == b""        # the server gave up on us and closed
        finally:
            sock.close()


TRICKLE_TIMEOUT_S = 0.5
TRICKLE_EVERY_S = 0.05          # a byte every 50 ms: a per-read timeout of 0.5 s would never fire
TRICKLE_BYTES = 100             # ten times the timeout's worth of bytes; the head is longer still


def test_a_request_trickled_one_byte_at_a_time_is_cut_at_the_request_timeout() -> None:
    head = b"GET /live HTTP/1.1\r\nHost: x\r\n" + b"X-Pad: " + b"a" * 1000
    with serving(request_timeout_s=TRICKLE_TIMEOUT_S) as server:
        sock = socket.create_connection(server.address, timeout=TIMEOUT_S)
        sent, cut = 0, False
        try:
            while sent < TRICKLE_BYTES and not cut:
                try:
                    sock.sendall(head[sent:sent + 1])
                    sent += 1
                except OSError:
                    cut = True
                time.sleep(TRICKLE_EVERY_S)
                cut = cut or not still_open(sock)
        finally:
            sock.close()
        served = request(server, "GET", "/live")
    assert cut, f"the server still waited for the request after {sent} bytes over {sent * TRICKLE_EVERY_S:g} s"
    assert served[0] == 200


def test_a_refused_request_still_being_sent_gets_its_answer_not_a_reset(server: LiveServer) -> None:
    """A request refused before it was read whole (a 4 MB request line): the server answers, half-closes and
    reads what still comes before it closes, so the client, still sending, reads the 414 instead of a reset."""
    for _ in range(5):
        with socket.create_connection(server.address, timeout=TIMEOUT_S) as sock:
            sock.sendall(b"GET /?x=" + b"a" * (4 << 20) + b" HTTP/1.1\r\nHost: x\r\n\r\n")
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
        assert data.startswith(b"HTTP/1.1 414 "), data[:100]
