"""No secret in any output of a server whose log URL has a password, ``redis://default:S3cr3t-pw@127.0.0.1:<port>/0``.

Each server runs as a real process in three situations: nothing listens on the port, the Redis there wants
another password, and a Redis that stops while a stream generates.  Every output is kept: what a client reads
(status line, headers, bodies, the event stream), the process's stdout and stderr (banner, start-up line,
warnings, access log, shutdown), and it is looked at after the process was stopped with SIGINT to its process
group.  The password appears in none of them; a client never reads the host and port either, only "the token
log is unavailable"; the operator's lines name the host with the password as ``***``.  The servers:
``tokenwire serve`` (on both event loops), ``uvicorn tokenwire.asgi:app`` (the canned answer), a
``TokenStreams`` of a model (``support.apps.fake_model:detached``) and the hosted function (``api/live.py``),
the last three with uvicorn's access log.  (The redaction itself, without a process: ``unit/test_secrets.py``.)
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest
from support.live import wait_until
from support.redis import RedisServer, redis_command
from support.requirements import ROOT, free_port

from tokenwire.endpoints.rules import LOG_UNAVAILABLE

PASSWORD = "S3cr3t-pw"
TIMEOUT_S = 15.0
UNAVAILABLE_BODY = json.dumps({"error": LOG_UNAVAILABLE}).encode()


def url_for(port: int, password: str = PASSWORD) -> str:
    return f"redis://default:{password}@127.0.0.1:{port}/0"


# -- the servers, as processes -----------------------------------------------------------------------
class Server:
    """One server process in a process group of its own; stdout and stderr are read by threads into ``said``."""

    def __init__(self, argv: list[str], env: dict[str, str], listening: re.Pattern[str]) -> None:
        self.said: list[str] = []
        self._lock = threading.Lock()
        self.proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, start_new_session=True)
        self._readers = [threading.Thread(target=self._read, args=(pipe,), daemon=True)
                         for pipe in (self.proc.stdout, self.proc.stderr)]
        for reader in self._readers:
            reader.start()
        match = self.wait_for(listening)
        self.port = int(match.group(1))

    def _read(self, pipe: object) -> None:
        for line in pipe:                                                       # type: ignore[attr-defined]
            with self._lock:
                self.said.append(line)

    def output(self) -> str:
        with self._lock:
            return "".join(self.said)

    def wait_for(self, pattern: re.Pattern[str]) -> re.Match[str]:
        def said() -> re.Match[str] | None:
            match = pattern.search(self.output())
            if match is None and self.proc.poll() is not None and not any(r.is_alive() for r in self._readers):
                raise AssertionError(f"exited without saying {pattern.pattern!r}: {self.output()!r}")
            return match
        return wait_until(said, lambda: f"{pattern.pattern!r} said; it said {self.output()!r}", TIMEOUT_S)

    def interrupt(self) -> int:
        """SIGINT to the whole process group, as a terminal's Ctrl-C; returns the exit status."""
        os.killpg(self.proc.pid, signal.SIGINT)
        try:
            code = self.proc.wait(TIMEOUT_S * 2)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            code = self.proc.wait()
        for reader in self._readers:
            reader.join(5)
        return code


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **extra}
    for name in ("TOKENWIRE_LOG_URL", "TOKENWIRE_TEST_LOG"):
        if name not in extra:
            env.pop(name, None)
    return env


def serve(loop: str, url: str) -> Server:
    return Server([sys.executable, "-m", "tokenwire", "serve", "--port", "0", "--log", url],
                  _env(TOKENWIRE_LOOP=loop), re.compile(r"serving on http://127\.0\.0\.1:(\d+)/"))


def uvicorn(target: str, url: str) -> Server:
    """uvicorn with its access log on (``--log-level info``) serving ``target`` on ``url``."""
    app_dir = ROOT / ("api" if target.startswith("live:") else "tests")
    port = free_port()
    return Server([sys.executable, "-m", "uvicorn", target, "--app-dir", str(app_dir), "--host", "127.0.0.1",
                   "--port", str(port), "--log-level", "info", "--timeout-graceful-shutdown", "2"],
                  _env(TOKENWIRE_LOG_URL=url, TOKENWIRE_TEST_LOG=url),
                  re.compile(r"Uvicorn running on http://127\.0\.0\.1:(\d+)"))


@contextmanager
def running(start: Callable[[], Server]) -> Iterator[Server]:
    server = start()
    try:
        yield server
    finally:
        if server.proc.poll() is None:
            os.killpg(server.proc.pid, signal.SIGKILL)
            server.proc.wait()


# The servers under test: how each starts, and the query of a stream that runs long enough to fail mid-way.
SERVE_LOOPS = ["asyncio", "uvloop"]


ASGI_APPS = {"canned": ("tokenwire.asgi:app", "tokens=277&producer_ms=20"),
             "model": ("support.apps.fake_model:detached", "n=200&delay_ms=20"),
             "hosted": ("live:app", "tokens=277&producer_ms=20")}


def _servers() -> list[tuple[str, str]]:
    return [("serve", loop) for loop in SERVE_LOOPS] + [("uvicorn", app) for app in ASGI_APPS]


def _start(kind: str, which: str, url: str) -> Callable[[], Server]:
    if kind == "serve":
        if which == "uvloop":
            pytest.importorskip("uvloop", reason="uvloop (the 'fast' extra) is not installed")
        return lambda: serve(which, url)
    return lambda: uvicorn(ASGI_APPS[which][0], url)


def _query(kind: str, which: str) -> str:
    return "tokens=277&producer_ms=20" if kind == "serve" else ASGI_APPS[which][1]


# -- what a client reads --------------------------------------------------------------------------
@dataclass
class Client:
    """Everything the clients of one server read, byte for byte."""

    port: int
    read: list[bytes] = field(default_factory=list)

    def exchange(self, method: str, target: str, headers: str = "") -> bytes:
        """One request on its own connection (``Connection: close``); returns the whole response, kept."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=TIMEOUT_S) as sock:
            length = "Content-Length: 0\r\n" if method == "POST" else ""
            sock.sendall(f"{method} {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{length}{headers}\r\n"
                         .encode())
            response = _read_to_end(sock)
        self.read.append(response)
        return response

    def refusals(self, stream_id: str = "abcdefghijklmnop") -> list[bytes]:
        """The three routes that need the log: each must be the one 503."""
        return [self.exchange("POST", "/streams?tokens=5"), self.exchange("GET", "/stream?tokens=5"),
                self.exchange("GET", f"/streams/{stream_id}/events", "Last-Event-ID: 3\r\n")]


def _read_to_end(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def assert_unavailable(response: bytes) -> None:
    head, _, body = response.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 503 "), response
    assert b"\r\nretry-after: 1" in head.lower(), response
    assert body == UNAVAILABLE_BODY, response


def assert_nothing_leaked(client: Client, server: Server, redis_port: int) -> str:
    """No output carries the password; no client read the host and port.  Returns what the server said."""
    said = server.output()
    seen = b"".join(client.read)
    assert PASSWORD.encode() not in seen, seen
    assert f"127.0.0.1:{redis_port}".encode() not in seen and b"default:" not in seen, seen
    assert PASSWORD not in said, said
    return said


def assert_clean_exit(code: int, said: str) -> None:
    """Stopped with SIGINT to its group, the server exited 0 and printed no traceback."""
    assert code == 0 and "Traceback" not in said, (code, said)


# -- 1. nothing listens on the port ------------------------------------------------------------------
@pytest.mark.parametrize(("kind", "which"), _servers())
def test_a_closed_port_leaks_no_password(kind: str, which: str) -> None:
    redis_port = free_port()
    with running(_start(kind, which, url_for(redis_port))) as server:
        client = Client(server.port)
        refused = client.refusals()
        server.wait_for(re.compile("answering 503"))
        code = server.interrupt()
    said = assert_nothing_leaked(client, server, redis_port)
    assert_clean_exit(code, said)
    for response in refused:
        assert_unavailable(response)
    shown = f"redis://default:***@127.0.0.1:{redis_port}/0"
    assert f"answering 503 (the token log is unavailable): token log unavailable: redis at {shown}: " in said
    if kind == "serve":
        assert f"token log: {shown}, shared by every instance" in said
        assert f"tokenwire serve: cannot reach redis at {shown} now; starting anyway" in said


# -- 2. the Redis there wants another password -------------------------------------------------------
def _require_password(redis_server: RedisServer, password: str) -> None:
    assert redis_command(redis_server.url, "CONFIG", "SET", "requirepass", password) == "OK"


@pytest.mark.parametrize(("kind", "which"), _servers())
def test_a_wrong_password_leaks_no_password(kind: str, which: str, own_redis: RedisServer) -> None:
    _require_password(own_redis, "another-pw")
    with running(_start(kind, which, url_for(own_redis.port))) as server:
        client = Client(server.port)
        refused = client.refusals()
        server.wait_for(re.compile("answering 503"))
        code = server.interrupt()
    said = assert_nothing_leaked(client, server, own_redis.port)
    assert_clean_exit(code, said)
    for response in refused:
        assert_unavailable(response)
    assert f"redis at redis://default:***@127.0.0.1:{own_redis.port}/0: AuthenticationError" in said


# -- 3. Redis stops while a stream generates ----------------------------------------------------------
def _first_token(sock: socket.socket) -> bytes:
    data = b""
    while b"\nevent: token\n" not in data and b"\nevent: token\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, data
        data += chunk
    return data


def _created(response: bytes) -> str:
    head, _, body = response.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 201 "), response
    return str(json.loads(body)["events_url"])


@pytest.mark.parametrize(("kind", "which"), _servers())
def test_redis_failing_mid_stream_leaks_no_password(kind: str, which: str, own_redis: RedisServer) -> None:
    _require_password(own_redis, PASSWORD)
    with running(_start(kind, which, url_for(own_redis.port))) as server:
        client = Client(server.port)
        events_url = _created(client.exchange("POST", f"/streams?{_query(kind, which)}"))
        with socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT_S) as sock:
            sock.sendall(f"GET {events_url} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            started = _first_token(sock)
            own_redis.stop()                                    # Redis goes away while the stream generates
            stream = started + _read_to_end(sock)
        client.read.append(stream)
        refused = client.refusals(events_url.split("/")[-2])
        server.wait_for(re.compile("answering 503"))
        code = server.interrupt()
    said = assert_nothing_leaked(client, server, own_redis.port)
    assert_clean_exit(code, said)
    assert b"event: done" not in stream                         # it ended without done, and said no more
    for response in refused:
        assert_unavailable(response)
    assert f"redis at redis://default:***@127.0.0.1:{own_redis.port}/0" in said
