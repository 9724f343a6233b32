"""``tokenwire proxy`` runs uvicorn with serve's request limits (``upstream.guard``), on httptools' protocol and on
h11's: a head past serve's limits is refused as serve refuses it before it is held whole, and a request
that does not arrive whole within the request timeout (slowloris: a head, or a body, trickled in) loses its
connection, as serve's do; a request that arrived whole then streams for as long as it takes.

Before, an outside probe held 3.3 GB in the proxy with 200 connections sending header lines for ever, and 60
half-sent requests kept every slot of ``--max-connections 60`` taken.  The app is ``TokenStreams(Upstream(...))``,
what ``tokenwire proxy`` serves, under uvicorn in a thread with the protocol the command gives it.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from support.asgi_thread import in_thread
from support.live import read_to_end, wait_until
from support.misbehaving_upstream import MisbehavingUpstream
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from tokenwire.asgi import TokenStreams
from tokenwire.endpoints.config import MAX_HEADER_BYTES
from tokenwire.upstream import Upstream, UpstreamConfig
from tokenwire.upstream.guard import guarded

TIMEOUT_S = 0.5          # the request timeout the proxy runs with here
WAIT_S = 15.0            # how long a test waits for the server to act, at most


@pytest.fixture(scope="module", params=[HttpToolsProtocol, H11Protocol], ids=["httptools", "h11"])
def proxy(request: pytest.FixtureRequest) -> Iterator[tuple[int, MisbehavingUpstream, type[Any]]]:
    with MisbehavingUpstream() as upstream:
        app = TokenStreams(Upstream(UpstreamConfig(upstream.url)))
        with in_thread(app, http=guarded(app.endpoints.routes, TIMEOUT_S, base=request.param)) as base:
            yield int(base.rsplit(":", 1)[1]), upstream, request.param


def connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)
    sock.settimeout(WAIT_S)
    return sock


def read_all(sock: socket.socket) -> bytes:
    """What the server sends until it closes the connection (a reset, as a timed-out connection's abort, counts)."""
    return read_to_end(sock, WAIT_S, reset_ends=True)


def test_headers_past_the_limit_are_serves_431(proxy: tuple[int, Any]) -> None:
    with connect(proxy[0]) as sock:
        sock.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n")
        sent = 0
        try:
            while sent < 8 * MAX_HEADER_BYTES:        # header lines for ever: refused long before this
                sock.sendall(b"X-Flood: " + b"a" * 4000 + b"\r\n")
                sent += 4011
        except (BrokenPipeError, ConnectionResetError):
            pass
        answer = read_all(sock)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 431 "), answer[:200]
    assert body == b"431 request headers longer than 16384 bytes or 100 lines\n", answer[:300]


def test_a_head_that_never_ends_loses_its_connection(proxy: tuple[int, Any]) -> None:
    with connect(proxy[0]) as sock:
        sock.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n")     # and nothing more
        assert read_all(sock) == b""                                 # aborted at the request timeout


def test_a_connection_that_says_nothing_loses_it_too(proxy: tuple[int, Any]) -> None:
    with connect(proxy[0]) as sock:
        assert read_all(sock) == b""


def test_a_body_trickled_in_loses_its_connection(proxy: tuple[int, Any]) -> None:
    body = json.dumps({"model": "count=3", "messages": [{"role": "user", "content": "x"}]}).encode()
    with connect(proxy[0]) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(body) + body[:10])
        assert read_all(sock) == b""


def _streamed(model: str, version: bytes = b"HTTP/1.1", extra: bytes = b"") -> bytes:
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "x"}], "stream": True}).encode()
    return (b"POST /v1/chat/completions " + version + b"\r\nHost: x\r\nContent-Type: application/json\r\n" + extra +
            b"Content-Length: %d\r\n\r\n" % len(body) + body)


def _text(answer: bytes) -> str:
    return "".join(json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
                   for line in answer.decode().split("\n") if line.startswith("data: {") and '"choices":[{' in line)


@pytest.mark.parametrize(("version", "extra", "after"), [
    (b"HTTP/1.1", b"", b""),
    (b"HTTP/1.1", b"Connection: close\r\n", b""),        # h11 takes the peer to MUST_CLOSE, not DONE
    (b"HTTP/1.0", b"", b""),                              # as nginx's proxy_pass sends by default
    (b"HTTP/1.1", b"", b"\r\n"),                          # a stray CRLF after the body, which servers ignore
], ids=["kept-alive", "connection-close", "http-1.0", "stray-crlf"])
def test_a_request_that_arrived_whole_streams_past_the_timeout(proxy: tuple[int, Any], version: bytes,
                                                               extra: bytes, after: bytes) -> None:
    """An answer of 200 chunks at 5 ms (a second, twice the request timeout) arrives whole, and the connection ends
    with it (one request a connection, as on serve: ``read_all`` returns at the server's close); httptools' protocol
    says so in the answer (``Connection: close``), h11's closes after it."""
    with connect(proxy[0]) as sock:
        sock.sendall(_streamed("count=200", version, extra) + after)
        answer = read_all(sock)
    head = answer.partition(b"\r\n\r\n")[0].lower()
    assert head.startswith(b"http/1.1 200 "), answer[:300]
    assert b"data: [DONE]" in answer and _text(answer) == "".join(f" e{i}" for i in range(200))
    if proxy[2] is HttpToolsProtocol:
        assert b"\r\nconnection: close" in head or version == b"HTTP/1.0" or b"Connection: close" in extra, head


def test_a_request_behind_the_first_ends_with_its_connection(proxy: tuple[int, Any]) -> None:
    """Pipelined behind a whole request, a request that never arrives whole holds no connection: the first is
    answered, and the connection ends with that answer."""
    partial = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"Content-Length: 100\r\n\r\n{\"mo")
    with connect(proxy[0]) as sock:
        sock.sendall(_streamed("count=3") + partial)
        answer = read_all(sock)                         # returns once the server closes: no wait for a timeout
    assert answer.count(b"HTTP/1.1 ") == 1 and _text(answer) == " e0 e1 e2", answer[-300:]


def test_a_burst_of_large_bodies_has_the_allocator_give_their_pages_back() -> None:
    """Ten near-1 MiB chat completions (past ``TRIM_AFTER_BYTES``) end in one trim, as on serve."""
    trims: list[int] = []
    with MisbehavingUpstream() as upstream:
        app = TokenStreams(Upstream(UpstreamConfig(upstream.url)))
        protocol = guarded(app.endpoints.routes, WAIT_S, trim=lambda: trims.append(1))
        with in_thread(app, http=protocol) as base:
            port = int(base.rsplit(":", 1)[1])
            body = json.dumps({"model": "count=1", "messages": [{"role": "user", "content": "x" * 1_000_000}]})
            for _ in range(10):
                with connect(port) as sock:
                    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                                 b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
                                 + body.encode())
                    assert read_all(sock).startswith(b"HTTP/1.1 200 ")
            wait_until(lambda: bool(trims), "the trim after the burst", WAIT_S)
    assert trims == [1]
