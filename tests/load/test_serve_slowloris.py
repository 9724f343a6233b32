"""A full ``tokenwire serve`` (its connection cap, or its descriptor limit) still serves a client that sends its
request at once: a new connection takes the slot of the oldest one that has not sent a complete request line,
and a connection that has sent its request is never shed for it.

Real processes on both loops: the server is ``python -m tokenwire serve`` (``support.served``);
the idle connections are this process's own sockets that never send a byte.  What is asserted: statuses, and
that the open event stream runs to its ``done``.  The server's CPU time (``/proc``) per connection it closed is
printed, not asserted: it is a speed, and depends on what else the machine runs (the attacker shares it).
"""

from __future__ import annotations

import errno
import resource
import selectors
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from support.live import token_ids, wait_until
from support.served import Served, served

PROBES = 10
PROBE_TIMEOUT_S = 2.0
LOOPS = ["asyncio", "uvloop"]


def _loop_env(loop: str) -> dict[str, str]:
    if loop == "uvloop":
        pytest.importorskip("uvloop", reason="uvloop (the 'fast' extra) is not installed")
    return {"TOKENWIRE_LOOP": loop}


def _probe(port: int) -> int:
    """One complete request on a new connection; its status (0: no answer within ``PROBE_TIMEOUT_S``)."""
    deadline = time.monotonic() + PROBE_TIMEOUT_S
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=PROBE_TIMEOUT_S) as sock:
            sock.sendall(b"GET /static/live.css HTTP/1.1\r\nHost: x\r\n\r\n")
            head = b""
            while b"\r\n" not in head and time.monotonic() < deadline:
                sock.settimeout(max(0.01, deadline - time.monotonic()))
                chunk = sock.recv(4096)
                if not chunk:
                    break
                head += chunk
    except OSError:
        return 0
    if time.monotonic() > deadline or not head.startswith(b"HTTP/1.1 "):
        return 0
    return int(head.split(b" ", 2)[1])


def _idle(port: int, count: int) -> list[socket.socket]:
    return [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(count)]


def _closed_by_server(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        return sock.recv(4096) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True                     # reset: an abort


def _fds(server: Served) -> int:
    import os
    return len(os.listdir(f"/proc/{server.proc.pid}/fd"))


@pytest.mark.parametrize("loop", LOOPS)
def test_a_full_server_sheds_the_oldest_idle_connection_and_serves_a_request(loop: str) -> None:
    with served("--quiet", "--max-connections", "50", env=_loop_env(loop)) as server:
        stream = socket.create_connection(("127.0.0.1", server.port), timeout=10)   # it has sent its request
        stream.sendall(b"GET /stream?tokens=30&producer_ms=60&scenario=block HTTP/1.1\r\nHost: x\r\n\r\n")
        assert stream.recv(12) == b"HTTP/1.1 200"
        line_only = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        line_only.sendall(b"GET /static/live.css HTTP/1.1\r\n")     # its request line, not yet its headers
        before = _fds(server)
        idle = _idle(server.port, 48)                 # the server is full: 50 connections
        wait_until(lambda: _fds(server) >= before + 48, "every idle connection accepted (and admitted)")
        statuses = [_probe(server.port) for _ in range(PROBES)]
        shed = [sock for sock in idle if _closed_by_server(sock)]
        kept = not _closed_by_server(line_only)
        line_only.setblocking(True)
        line_only.sendall(b"Host: x\r\n\r\n")
        finished = line_only.recv(12)
        line_only.close()
        body = b""
        stream.settimeout(10)
        while chunk := stream.recv(65536):
            body += chunk
        for sock in idle:
            sock.close()
        stream.close()
    assert statuses.count(200) >= PROBES - 1, statuses
    # A probe's slot is freed when it is answered, so the next probe may find one free: at least one idle
    # connection was shed, the oldest first, and none more than the probes needed.
    assert 1 <= len(shed) <= PROBES and set(shed) == set(idle[:len(shed)])
    assert token_ids(body.partition(b"\r\n\r\n")[2]) == list(range(30)) and b"event: done" in body
    assert kept and finished == b"HTTP/1.1 200"         # a complete request line is never shed either


@pytest.mark.parametrize("loop", LOOPS)
def test_a_full_server_with_no_idle_connection_still_answers_503(loop: str) -> None:
    with served("--quiet", "--max-connections", "3", env=_loop_env(loop)) as server:
        streams = []
        for _ in range(3):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
            sock.sendall(b"GET /stream?tokens=20&producer_ms=50&scenario=block HTTP/1.1\r\nHost: x\r\n\r\n")
            assert sock.recv(12) == b"HTTP/1.1 200"
            streams.append(sock)
        status = _probe(server.port)
        for sock in streams:
            body = b""
            while chunk := sock.recv(65536):
                body += chunk
            sock.close()
            assert b"event: done" in body             # none was shed
    assert status == 503


class Slowloris:
    """``count`` connections that never send a byte, each re-opened as soon as the server closes it (a thread)."""

    def __init__(self, port: int, count: int) -> None:
        self.port, self.count, self.closed = port, count, 0
        self.selector = selectors.DefaultSelector()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _open(self) -> None:
        sock = socket.socket()
        sock.setblocking(False)
        code = sock.connect_ex(("127.0.0.1", self.port))
        if code not in (0, errno.EINPROGRESS):
            sock.close()
            return
        self.selector.register(sock, selectors.EVENT_READ)

    def _run(self) -> None:
        for _ in range(self.count):
            self._open()
        while not self._stop.is_set():
            for key, _ in self.selector.select(0.05):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                try:
                    data = sock.recv(4096)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if data:
                    continue                          # a 503 on its way: the close follows
                self.selector.unregister(sock)
                sock.close()
                self.closed += 1
                self._open()
        for key in list(self.selector.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]

    @contextmanager
    def running(self) -> Iterator[Slowloris]:
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._thread.join(10)


@pytest.mark.parametrize("loop", LOOPS)
def test_under_ulimit_1024_a_client_holding_1100_idle_connections_does_not_keep_others_out(loop: str) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1400:
        pytest.skip(f"this test holds 1,100 connections and needs a descriptor limit of 1,400; the hard one is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1400), hard))
    with served("--quiet", nofile=1024, env=_loop_env(loop)) as server, \
            Slowloris(server.port, 1100).running() as attacker:
        wait_until(lambda: attacker.closed > 0, "the server to shed one of the attacker's connections")  # full
        cpu0, closed0 = server.cpu_s(), attacker.closed
        statuses = []
        for _ in range(PROBES):
            statuses.append(_probe(server.port))
            time.sleep(0.2)                           # pacing the probes over the window, not ordering
        cpu, closed = server.cpu_s() - cpu0, attacker.closed - closed0
    per_close_us = cpu / max(1, closed + PROBES) * 1e6
    print(f"\n{loop}: probes {statuses}; the server closed {closed} idle connections in the window and spent "
          f"{cpu:.3f} s CPU: {per_close_us:.1f} us per closed connection")
    assert statuses.count(200) >= PROBES - 1, statuses
    assert closed > 0, "the attacker was never shed: the probes got in some other way"
