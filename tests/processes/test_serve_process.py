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
import signal
import socket
import threading
import time

import pytest
from support.live import events, token_ids, wait_until
from support.served import served

IO_TIMEOUT_S = 10.0


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
