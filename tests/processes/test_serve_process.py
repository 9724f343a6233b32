"""``tokenwire serve`` as a real process: a low descriptor limit, SIGTERM, client aborts, a stalled Redis.

Each test starts ``python -m tokenwire serve --port 0`` and reads its port
from the banner.  What is asserted: statuses, complete frames, exit codes,
what the server printed, and its CPU time (read from ``/proc``) as a bound
on spinning, never a duration of our own.  A test waits for what it needs
(a token on a stream, the server having read a request, the server holding
no connection), seen on the socket or in ``/proc``, each wait bounded.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from support.live import events, token_ids, wait_until

ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 15.0
IO_TIMEOUT_S = 10.0
# The TCP states of /proc/net/tcp that matter here.
_LISTEN = "0A"


def _tcp_table() -> list[tuple[int, int, str, int, int, int]]:
    """Every TCP socket of this host: (local port, remote port, state, send queue, receive queue, inode)."""
    rows = []
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            tx, rx = (int(n, 16) for n in f[4].split(":"))
            rows.append((int(f[1].rsplit(":", 1)[1], 16), int(f[2].rsplit(":", 1)[1], 16), f[3], tx, rx, int(f[9])))
    return rows


class Served:
    """One ``tokenwire serve`` process and what it printed."""

    def __init__(self, *flags: str, nofile: int | None = None, env: dict[str, str] | None = None) -> None:
        environ = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
        environ.pop("TOKENWIRE_LOG_URL", None)

        def limit() -> None:
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
        self.proc = subprocess.Popen([sys.executable, "-m", "tokenwire", "serve", "--port", "0", *flags],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environ, text=True,
                                     preexec_fn=limit)
        self.banner = self.line()
        if "serving on http://127.0.0.1:" not in self.banner:
            self.proc.kill()
            raise AssertionError(f"the server did not start: {self.banner!r} {self.proc.stderr.read()!r}")
        self.port = int(self.banner.split("http://127.0.0.1:")[1].split("/")[0])
        self.signalled = False

    def send(self, sig: int) -> None:
        """Send ``sig`` once; ``stop`` then only waits for the exit it causes."""
        self.signalled = True
        self.proc.send_signal(sig)

    def line(self) -> str:
        """The next line the server prints on stdout ("" if none comes within the start-up timeout)."""
        box: list[str] = []
        reader = threading.Thread(target=lambda: box.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(START_TIMEOUT_S)
        return box[0] if box else ""

    def get(self, target: str, method: str = "GET", timeout_s: float = IO_TIMEOUT_S,
            sent: list[int] | None = None) -> tuple[int, bytes]:
        """One request; with ``sent``, the connection's local port is appended to it once the request is sent."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout_s)
        try:
            conn.request(method, target)
            if sent is not None and conn.sock is not None:
                sent.append(conn.sock.getsockname()[1])
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def has_read(self, client_port: int) -> bool:
        """True once the server has read all that the connection from ``client_port`` sent (or it is closed)."""
        for local, remote, _, send_queue, receive_queue, _ in _tcp_table():
            if (local, remote) == (client_port, self.port) and send_queue:     # not yet acknowledged
                return False
            if (local, remote) == (self.port, client_port) and receive_queue:  # acknowledged, not yet read
                return False
        return True

    def connections(self) -> int:
        """Connections the server process holds: its sockets that are neither Unix sockets nor listening."""
        unix = {int(line.split()[6]) for line in Path("/proc/net/unix").read_text().splitlines()[1:]}
        listening = {inode for *_, state, _, _, inode in _tcp_table() if state == _LISTEN}
        held = 0
        for fd in Path(f"/proc/{self.proc.pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:                       # closed while we looked
                continue
            if target.startswith("socket:[") and int(target[8:-1]) not in unix | listening:
                held += 1
        return held

    def cpu_s(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self, sig: int = signal.SIGKILL) -> tuple[int, str, str]:
        """Signal the server (unless it is already exiting after a signal of the test's own) and reap it."""
        if self.proc.poll() is None and not self.signalled:
            self.proc.send_signal(sig)
        try:
            out, err = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
        return self.proc.returncode, out, err


@contextmanager
def served(*flags: str, **kwargs: object) -> Iterator[Served]:
    server = Served(*flags, **kwargs)  # type: ignore[arg-type]
    try:
        yield server
    finally:
        server.stop()


def _stream(port: int, target: str, out: list[bytes], headers: str = "",
            first_token: threading.Event | None = None) -> None:
    """Read the answer to ``GET target`` to its end into ``out``; ``first_token`` is set when a token arrives."""
    with socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT_S) as sock:
        sock.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\n{headers}\r\n".encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
            if first_token is not None and b"event: token" in data:
                first_token.set()
        out.append(data)


def test_the_banner_names_the_urls_and_the_token_log() -> None:
    with served("--quiet") as server:
        rest = [server.line() for _ in range(3)]
    assert server.banner.startswith(f"tokenwire serving on http://127.0.0.1:{server.port}/")
    assert any(f"http://127.0.0.1:{server.port}/live" in line for line in rest)
    assert any(line.startswith("token log: memory") for line in rest)


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_low_descriptor_limit_does_not_spin_and_the_server_recovers(loop: str) -> None:
    if loop == "uvloop":
        pytest.importorskip("uvloop", reason="uvloop (the 'fast' extra) is not installed")
    with served("--quiet", nofile=64, env={"TOKENWIRE_LOOP": loop}) as server:
        held = []
        try:
            for _ in range(120):                 # far past what the server may open
                held.append(socket.create_connection(("127.0.0.1", server.port), timeout=IO_TIMEOUT_S))
            cpu0 = server.cpu_s()
            time.sleep(2.0)                      # the window CPU is measured over (out of descriptors all of it)
            spent = server.cpu_s() - cpu0
        finally:
            for sock in held:
                sock.close()
        status = 0

        def answers_again() -> bool:
            nonlocal status
            with contextlib.suppress(OSError):
                status = server.get("/live", timeout_s=2)[0]
            return status == 200
        wait_until(answers_again, "the server to answer /live again", timeout_s=20)
        code, _, err = server.stop(signal.SIGTERM)
    assert spent < 0.5, f"the server burnt {spent:.2f} s of CPU in 2 s while out of descriptors"
    assert status == 200 and code == 0
    assert "Traceback" not in err


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_sigterm_finishes_open_streams_and_an_in_flight_page_then_exits_0(loop: str) -> None:
    if loop == "uvloop":
        pytest.importorskip("uvloop", reason="uvloop (the 'fast' extra) is not installed")
    with served("--quiet", "--grace-s", "10", env={"TOKENWIRE_LOOP": loop}) as server:
        bodies: list[bytes] = []
        pages: list[tuple[int, bytes]] = []
        tokens = [threading.Event() for _ in range(3)]
        page_port: list[int] = []
        readers = [threading.Thread(target=_stream, args=(server.port, "/stream?tokens=60&producer_ms=20", bodies),
                                    kwargs={"first_token": token}) for token in tokens]
        page = threading.Thread(target=lambda: pages.append(
            server.get("/?clock=real&format=json&tokens=40&reader_ms=1", timeout_s=30, sent=page_port)))
        for thread in (*readers, page):
            thread.start()
        # The streams and the page are under way: a token on each stream, the page's request read by the server.
        assert all(token.wait(IO_TIMEOUT_S) for token in tokens), "a stream sent no token"
        wait_until(lambda: page_port and server.has_read(page_port[0]), "the server to read the page's request")
        server.send(signal.SIGTERM)
        for thread in (*readers, page):
            thread.join(30)
        code, _, err = server.stop(signal.SIGTERM)
        refused = True
        try:
            socket.create_connection(("127.0.0.1", server.port), timeout=1).close()
            refused = False
        except OSError:
            pass
    assert code == 0 and "Traceback" not in err
    assert len(bodies) == 3 and all(token_ids(b.partition(b"\r\n\r\n")[2]) == list(range(60)) for b in bodies)
    assert all(b.endswith(b"\n\n") and b"event: done" in b for b in bodies)
    assert pages and pages[0][0] == 200 and pages[0][1].rstrip().endswith(b"}")
    assert refused


def test_past_the_grace_a_stream_is_closed_after_a_whole_frame() -> None:
    with served("--quiet", "--grace-s", "0.5") as server:
        bodies: list[bytes] = []
        token = threading.Event()
        reader = threading.Thread(target=_stream, args=(server.port, "/stream?tokens=200&producer_ms=50", bodies),
                                  kwargs={"first_token": token})
        reader.start()
        assert token.wait(IO_TIMEOUT_S), "the stream sent no token"
        server.send(signal.SIGTERM)
        reader.join(30)
        code, _, err = server.stop(signal.SIGTERM)
    body = bodies[0].partition(b"\r\n\r\n")[2]
    ids = token_ids(body)
    assert code == 0 and "Traceback" not in err
    assert body.endswith(b"\n\n") and b"event: done" not in body and ids == list(range(len(ids))) and ids


def test_client_aborts_are_not_errors_and_quiet_means_quiet() -> None:
    with served("--quiet") as server:
        for i in range(20):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=IO_TIMEOUT_S)
            sock.sendall(b"GET /stream?tokens=100&producer_ms=1 HTTP/1.1\r\nHost: x\r\n\r\n")
            sock.recv(200)
            if i % 2:                 # a reset instead of a FIN
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            sock.close()
        status = server.get("/stream?tokens=5")[0]
        # Every aborted connection has been dealt with (and anything it would print, printed).
        wait_until(lambda: server.connections() == 0, "the server to let go of every connection")
        code, _, err = server.stop(signal.SIGTERM)
    assert status == 200 and code == 0 and err == ""


def test_a_redis_stalled_during_create_gives_201_or_503_never_an_empty_reply(own_redis) -> None:
    redis_server = own_redis
    with served("--quiet", "--log", redis_server.url) as server:
        assert server.get("/streams?tokens=5", "POST")[0] == 201
        answers: list[object] = []
        sent: list[int] = []                         # the creates' local ports, once each is sent

        def create() -> None:
            try:
                answers.append(server.get("/streams?tokens=5", "POST", timeout_s=15, sent=sent)[0])
            except (OSError, http.client.HTTPException) as exc:
                answers.append(f"{type(exc).__name__}: {exc}")
        clients = [threading.Thread(target=create) for _ in range(10)]
        os.kill(redis_server.proc.pid, signal.SIGSTOP)
        try:
            for thread in clients:
                thread.start()
            page = server.get("/live")[0]            # the loop is not blocked by the stall
            # Every create is in the stall: sent and read by the server (or already answered).
            wait_until(lambda: len(sent) == 10 and all(server.has_read(port) for port in sent),
                       "the server to read every create")
        finally:
            os.kill(redis_server.proc.pid, signal.SIGCONT)
        for thread in clients:
            thread.join(30)
        after = server.get("/streams?tokens=5", "POST")[0]
        code, _, err = server.stop(signal.SIGTERM)
    assert page == 200
    assert set(map(str, answers)) <= {"201", "503"} and len(answers) == 10, answers
    assert after == 201 and code == 0 and "Traceback" not in err and "already exists" not in err


def test_a_stream_cut_by_a_shutdown_resumes_on_another_instance(redis_server) -> None:
    url = f"{redis_server.url}?lease_ms=400&block_ms=50"
    with served("--quiet", "--grace-s", "0.3", "--log", url) as first, served("--quiet", "--log", url) as second:
        bodies: list[bytes] = []
        token = threading.Event()
        reader = threading.Thread(target=_stream, args=(first.port, "/stream?tokens=80&producer_ms=25", bodies),
                                  kwargs={"first_token": token})
        reader.start()
        assert token.wait(IO_TIMEOUT_S), "the stream sent no token"
        first.send(signal.SIGTERM)
        reader.join(30)
        code, _, _ = first.stop(signal.SIGTERM)
        got = events(bodies[0].partition(b"\r\n\r\n")[2])
        stream_id = next(e for e in got if e.event == "open").data.split('"stream_id": "')[1].split('"')[0]
        ids = [int(e.id) for e in got if e.event == "token"]
        rest: list[bytes] = []
        _stream(second.port, f"/streams/{stream_id}/events", rest, f"Last-Event-ID: {ids[-1]}\r\n")
    resumed = token_ids(rest[0].partition(b"\r\n\r\n")[2])
    assert code == 0 and ids == list(range(len(ids))) and len(ids) < 80
    assert resumed == list(range(len(ids), 80)) and b"event: done" in rest[0]
