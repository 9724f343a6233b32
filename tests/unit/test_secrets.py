"""No secret in any output (issue 22, item 1): a password-bearing log URL, and everything each server says.

Each server runs as a real process on a log URL with a password, ``redis://default:S3cr3t-pw@127.0.0.1:<port>/0``,
in three situations: nothing listens on the port, the Redis there wants another password, and a Redis that
stops while a stream generates.  Every output is kept: what a client reads (status line, headers, bodies,
the event stream), the process's stdout and stderr (banner, start-up line, warnings, access log, shutdown),
and it is looked at after the process was stopped with SIGINT to its process group.  The password appears in
none of them; a client never reads the host and port either, only "the token log is unavailable"; the
operator's lines name the host with the password as ``***``.  The servers: ``tokenwire serve`` (on both
event loops), ``uvicorn tokenwire.asgi:app`` (the canned answer), a ``TokenStreams`` of a model
(``support.apps.fake_model:detached``) and the hosted function (``api/live.py``), the last three with
uvicorn's access log.
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
from support.redis import RedisServer
from support.requirements import ROOT, free_port

from tokenwire.asgi.hosted import hosted_app, missing_log
from tokenwire.endpoints.rules import LOG_UNAVAILABLE
from tokenwire.redislog.redact import redact_url, scrub

PASSWORD = "S3cr3t-pw"
TIMEOUT_S = 15.0
UNAVAILABLE_BODY = json.dumps({"error": LOG_UNAVAILABLE}).encode()


def url_for(port: int, password: str = PASSWORD) -> str:
    return f"redis://default:{password}@127.0.0.1:{port}/0"


# -- the redaction itself -------------------------------------------------------------------------
@pytest.mark.parametrize(("url", "shown"), [
    ("redis://default:S3cr3t-pw@127.0.0.1:6379/0", "redis://default:***@127.0.0.1:6379/0"),
    ("rediss://:S3cr3t-pw@cache.internal:6380/2?lease_ms=5", "rediss://:***@cache.internal:6380/2?lease_ms=5"),
    ("redis://S3cr3t-pw@127.0.0.1:6379/0", "redis://***@127.0.0.1:6379/0"),
    ("redis://127.0.0.1:6379/0?password=S3cr3t-pw&db=1", "redis://127.0.0.1:6379/0?password=***&db=1"),
    ("unix://:S3cr3t-pw@/run/redis.sock?db=0", "unix://:***@/run/redis.sock?db=0"),
    ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
    ("redis://default:pa/ss?x@127.0.0.1:6379/0", "redis://default:***@127.0.0.1:6379/0"),   # unencoded: all of it
    ("S3cr3t-pw@cache.internal:6379", "***@cache.internal:6379"),                          # no scheme
])
def test_redact_url_keeps_the_host_and_hides_the_password(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_scrub_takes_the_password_out_of_any_text_as_written_or_quoted() -> None:
    url = "redis://default:p%40ss@h:1/0"
    assert scrub("auth p@ss failed, p%40ss too", url) == "auth *** failed, *** too"
    assert scrub("nothing to hide", "redis://h:1/0") == "nothing to hide"


@pytest.mark.parametrize("url", ["S3cr3t-pw@cache.internal:6379", "default:S3cr3t-pw@cache.internal:6379",
                                 "cache.internal:6379", "http://default:S3cr3t-pw@cache.internal:6379/0"])
def test_the_hosted_refusal_of_a_wrong_setting_quotes_no_more_than_a_scheme(url: str) -> None:
    said = missing_log(url)
    assert said is not None and PASSWORD not in said and "cache.internal" not in said
    assert said.endswith("must be a redis:// or rediss:// URL, " +
                         ("got one starting 'http'" if url.startswith("http") else "got something else"))


def test_a_bad_log_url_is_refused_with_the_password_hidden(capsys: pytest.CaptureFixture[str]) -> None:
    from tokenwire.cli import main
    assert main(["serve", "--log", "http://default:S3cr3t-pw@127.0.0.1:1/0"]) == 2
    err = capsys.readouterr().err
    assert err == ("tokenwire serve: --log must be 'memory' or a redis://, rediss:// or unix:// URL; got "
                   "'http://default:***@127.0.0.1:1/0'\n")


@pytest.mark.parametrize(("url", "said"), [
    ("redis://default:S3cr3t-pw@127.0.0.1:notaport/0",
     "log URL 'redis://default:***@127.0.0.1:notaport/0' is malformed: Port could not be cast to integer value "
     "as 'notaport'"),
    ("redis://default:S3cr3t-pw@127.0.0.1:99999/0",
     "log URL 'redis://default:***@127.0.0.1:99999/0' is malformed: Port out of range 0-65535"),
    ("redis://default:S3cr3t-pw@[::1/0", "log URL 'redis://default:***@[::1/0' is malformed: Invalid IPv6 URL"),
    ("redis://127.0.0.1:1/0?password=S3cr3t-pw&socket_timeout=abc",
     "log URL 'redis://127.0.0.1:1/0?password=***&socket_timeout=abc' is malformed: "
     "Invalid value for 'socket_timeout' in connection URL."),
    ("redis://default:S3cr3t-pw@127.0.0.1:1/cache",     # redis-py would quietly use database 0
     "log URL 'redis://default:***@127.0.0.1:1/cache' names database 'cache'; a database is a number (/0)"),
])
def test_a_malformed_log_url_is_one_line_not_a_traceback(url: str, said: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    from tokenwire.cli import main
    assert main(["serve", "--port", "0", "--log", url]) == 2
    assert capsys.readouterr() == ("", f"tokenwire serve: {said}\n")


@pytest.mark.parametrize(("url", "max_duration"), [("redis://default:S3cr3t-pw@cache.internal:notaport/0", None),
                                                   ("redis://default:S3cr3t-pw@cache.internal:1/0", "soon")])
def test_the_hosted_app_with_a_setting_it_cannot_use_answers_503_and_logs_why(
        url: str, max_duration: str | None, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    # It raised at import (the function crashed on every request), with the log URL's host in the traceback.
    if max_duration is not None:
        monkeypatch.setenv("TOKENWIRE_MAX_DURATION_S", max_duration)
    app = hosted_app({"TOKENWIRE_LOG_URL": url})
    assert app.streams is None and app.unavailable == (
        "the live page cannot start with its settings (TOKENWIRE_LOG_URL, TOKENWIRE_MAX_DURATION_S): the "
        "function's log says which is wrong")
    assert "tokenwire live: " in caplog.text and PASSWORD not in caplog.text


def test_redact_url_of_an_unclosed_ipv6_host_still_hides_the_password() -> None:
    assert redact_url("redis://[::1/0?password=S3cr3t-pw") == "redis://[::1/0?password=***"
    assert redact_url("redis://default:S3cr3t-pw@[::1/0") == "redis://default:***@[::1/0"


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
    with socket.create_connection(("127.0.0.1", redis_server.port), timeout=5) as sock:
        sock.sendall(f"CONFIG SET requirepass {password}\r\n".encode())
        assert sock.recv(64).startswith(b"+OK")


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
