"""Helpers shared by the tests that run a server in this process; this module holds no tests.

``in_thread(server)`` runs any ``socketserver`` server (the live server, the
report handler under ``ThreadingHTTPServer``, a test's own) on a thread and
shuts it down on exit; ``serving(...)`` is a ``LiveServer`` run that way.
Every server binds 127.0.0.1 port 0 and runs in this process (so its
threads, file descriptors and memory can be counted) unless a test needs a
real process to kill.  Every socket has a timeout and every wait is a loop
bounded in time; assertions are about states and counts, not durations.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import inspect
import json
import os
import resource
import socket
import socketserver
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from http.server import ThreadingHTTPServer
from typing import TypeVar

from tokenwire.core.sse import Decoder, Event
from tokenwire.endpoints.config import LiveConfig
from tokenwire.endpoints.registry import Registry
from tokenwire.endpoints.routes import LIVE_ROUTES, RouteTable
from tokenwire.handler import handler
from tokenwire.live.server import LiveServer, make_server

TIMEOUT_S = 10.0
POLL_S = 0.005                     # how often wait_until asks its condition again
S = TypeVar("S", bound=socketserver.BaseServer)
T = TypeVar("T")
SERVER_NAME = "tokenwire"          # the whole Server header: a name, no version


class QuietHandler(handler):
    """The report handler without its access log on stderr."""

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the stdlib's name)
        pass


@contextlib.contextmanager
def in_thread(server: S) -> Iterator[S]:
    """Run ``server.serve_forever`` on a daemon thread; on exit shut it down, close it and join the thread."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(TIMEOUT_S)


@contextlib.contextmanager
def serving_report() -> Iterator[tuple[str, int]]:
    """The serverless report ``handler`` (without its access log) on 127.0.0.1:0 in a thread; yields the address."""
    with in_thread(ThreadingHTTPServer(("127.0.0.1", 0), QuietHandler)) as server:
        yield "127.0.0.1", server.server_address[1]


@contextlib.contextmanager
def serving(registry: Registry | None = None, routes: RouteTable = LIVE_ROUTES,
            **config: object) -> Iterator[LiveServer]:
    """A ``LiveServer`` of ``routes`` on 127.0.0.1:0 in a thread; ``config`` goes to ``LiveConfig``."""
    live = LiveConfig(access_log=False, **config)  # type: ignore[arg-type]
    with in_thread(make_server(registry=registry, config=live, routes=routes)) as server:
        yield server


def wait_until(condition: Callable[[], T], what: str | Callable[[], str], timeout_s: float = TIMEOUT_S) -> T:
    """Poll ``condition`` until it is true and return what it gave; fail naming ``what`` after ``timeout_s``.

    The one way a test waits for something to have happened (a state, a count, a line said): never a
    sleep of a guessed length.  ``what`` may be a function, asked at the failure, to say what was seen.
    """
    deadline = time.monotonic() + timeout_s
    while not (got := condition()):
        if time.monotonic() > deadline:
            _timed_out(what, timeout_s)
        time.sleep(POLL_S)
    return got


def _timed_out(what: str | Callable[[], str], timeout_s: float) -> None:
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what if isinstance(what, str) else what()}")


async def await_until(condition: Callable[[], T | Awaitable[T]], what: str | Callable[[], str],
                      timeout_s: float = TIMEOUT_S) -> T:
    """``wait_until`` for a condition on the running event loop (awaited if it is a coroutine, as a log's
    call is): polls it between the loop's turns."""
    async def ask() -> T:
        got = condition()
        return await got if inspect.isawaitable(got) else got  # type: ignore[return-value]

    deadline = time.monotonic() + timeout_s
    while not (got := await ask()):
        if time.monotonic() > deadline:
            _timed_out(what, timeout_s)
        await asyncio.sleep(POLL_S)
    return got


def request(server: LiveServer, method: str, target: str, headers: dict[str, str] | None = None,
            body: bytes | None = None) -> tuple[int, dict[str, str], bytes]:
    """One request with ``http.client``; returns status, lower-cased headers, body."""
    host, port = server.address
    conn = http.client.HTTPConnection(host, port, timeout=TIMEOUT_S)
    try:
        conn.request(method, target, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def raw(server: LiveServer, data: bytes, timeout_s: float = TIMEOUT_S) -> bytes:
    """Send ``data`` as is on a new connection; return everything until the server closes."""
    with socket.create_connection(server.address, timeout=timeout_s) as sock:
        sock.sendall(data)
        return read_to_end(sock, timeout_s)


def declared(method: str, target: str, length: str) -> bytes:
    """A request head that declares a body of ``length`` (``Content-Length``) and sends none of it."""
    return f"{method} {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {length}\r\n\r\n".encode()


def split_response(response: bytes) -> tuple[int, dict[str, str], bytes]:
    """Parse a raw HTTP/1.x response: status, lower-cased headers (last wins), body."""
    head, _, body = response.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers, body


def error_of(body: bytes) -> str:
    """The message of a JSON error body."""
    return str(json.loads(body)["error"])


def create(server: LiveServer, query: str = "tokens=30&scenario=block") -> str:
    """POST /streams; returns the new stream id."""
    status, _, body = request(server, "POST", f"/streams?{query}")
    assert status == 201, body
    return str(json.loads(body)["stream_id"])


def events(body: bytes) -> list[Event]:
    return Decoder().feed(body)


def token_ids(body: bytes) -> list[int]:
    return [int(e.id) for e in events(body) if e.event == "token"]


def token_text(body: bytes) -> str:
    return "".join(e.data for e in events(body) if e.event == "token")


def open_events(server: LiveServer, target: str, headers: dict[str, str] | None = None,
                rcvbuf: int | None = None) -> socket.socket:
    """Send a GET for ``target`` on a raw socket (optionally with a tiny receive buffer); returns the socket."""
    sock = socket.socket()
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(TIMEOUT_S)
    sock.connect(server.address)
    extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    sock.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\n{extra}\r\n".encode())
    return sock


def read_head(sock: socket.socket) -> tuple[int, bytes]:
    """Read a response head byte by byte; returns the status and any body bytes (none: one byte at a time)."""
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        byte = sock.recv(1)
        assert byte, f"the server closed before the end of the head: {head!r}"
        head += byte
        assert len(head) < 65536, "no end of the response head in 64 KiB"
    return int(head.split(b" ", 2)[1]), head


def read_until_tokens(sock: socket.socket, decoder: Decoder, count: int) -> tuple[list[Event], bytes]:
    """Read until ``decoder`` has produced ``count`` token events; returns all events and the bytes read."""
    got: list[Event] = []
    wire = b""
    deadline = time.monotonic() + TIMEOUT_S
    while sum(e.event == "token" for e in got) < count:
        assert time.monotonic() < deadline, f"no {count} tokens after {TIMEOUT_S} s ({len(got)} events)"
        chunk = sock.recv(4096)
        assert chunk, f"the stream ended after {len(got)} events"
        wire += chunk
        got += decoder.feed(chunk)
    return got, wire


def read_token_ids(sock: socket.socket, count: int) -> list[int]:
    """Read a 200 response head, then until ``count`` token events; returns the ids of every token read."""
    status, head = read_head(sock)
    assert status == 200, head
    got, _ = read_until_tokens(sock, Decoder(), count)
    return [int(e.id) for e in got if e.event == "token"]


def read_to_end(sock: socket.socket, timeout_s: float = TIMEOUT_S, *, reset_ends: bool = False) -> bytes:
    """Read until the server closes the connection; fail if it has not after ``timeout_s`` in total
    (a socket timeout alone restarts on every ping).  ``reset_ends``: a reset is the close (a server that aborts)."""
    out = b""
    deadline = time.monotonic() + timeout_s
    try:
        while chunk := sock.recv(65536):
            out += chunk
            if time.monotonic() > deadline:
                raise AssertionError(f"the server kept the connection open past {timeout_s} s ({len(out)} bytes)")
    except ConnectionResetError:
        if not reset_ends:
            raise
    return out


def read_request(sock: socket.socket) -> tuple[str, dict[str, str], bytes] | None:
    """What a test's own loopback server reads of a request: its target, its headers (names in lower case) and the
    body its ``Content-Length`` says; None if the client closed before the head's end (64 KiB at most)."""
    head = b""
    while b"\r\n\r\n" not in head and len(head) < 65536:
        got = sock.recv(4096)
        if not got:
            return None
        head += got
    head, _, body = head.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines[1:])}
    while len(body) < int(headers.get("content-length", "0")) and (got := sock.recv(65536)):
        body += got
    return lines[0].split(" ")[1], headers, body


# -- resources of this process -------------------------------------------------------
def open_fds() -> int:
    """File descriptors this process has open right now."""
    return len(os.listdir("/proc/self/fd"))


def rss_kib() -> int:
    """Resident memory of this process (``VmRSS``), in KiB."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS in /proc/self/status")


def raise_nofile(needed: int) -> None:
    """Raise this process's open-file limit to its hard limit; fail clearly if that is below ``needed``."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    assert soft >= needed, f"RLIMIT_NOFILE hard limit is {hard}; this test needs {needed} descriptors"


def still_open(sock: socket.socket) -> bool:
    """True if the peer has not closed ``sock`` (nothing to read, no EOF), without blocking."""
    timeout = sock.gettimeout()
    sock.settimeout(0.0)          # with a timeout set, recv would first wait for readability
    try:
        return sock.recv(1, socket.MSG_PEEK) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        sock.settimeout(timeout)
