"""What the ASGI app does when uvicorn is told to exit, and to a reader that stops reading, with real
uvicorn processes: the README's FastAPI example with a model that is still thinking exits
within the app's grace after SIGTERM, without a traceback, its reader told to resume; a reader that takes
nothing past the write timeout has its connection closed (not left ESTABLISHED with megabytes queued)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from support.asgi import ROOT, Uvicorn
from support.docs import asgi_example
from support.live import wait_until
from support.requirements import free_port

GRACE_S = 1.0
# uvicorn's own start-up and exit, beyond the grace: bounded, generous for a loaded machine.
EXIT_MARGIN_S = 8.0


def _start(app_dir: Path, target: str, loop: str,
           env: dict[str, str] | None = None) -> tuple[subprocess.Popen[bytes], int, Path]:
    port, errors = free_port(), app_dir / "stderr.txt"
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", target, "--app-dir", str(app_dir), "--host", "127.0.0.1", "--port",
         str(port), "--loop", loop, "--log-level", "info"],
        cwd=ROOT, env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL, stderr=errors.open("wb"))
    deadline = time.monotonic() + 30          # the bound on its start-up, ended by the first answer
    while time.monotonic() < deadline:
        assert proc.poll() is None, errors.read_text()
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc, port, errors
        except OSError:
            time.sleep(0.02)
    proc.kill()
    raise AssertionError(f"uvicorn did not listen: {errors.read_text()}")


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_sigterm_with_a_thinking_model_exits_within_the_grace_without_a_traceback(tmp_path: Path, loop: str) -> None:
    code = asgi_example()
    assert "TokenStreams(model)" in code
    (tmp_path / "example.py").write_text(code.replace("TokenStreams(model)", f"TokenStreams(model, grace_s={GRACE_S})"))
    standin = Uvicorn("support.apps.upstream_standin:app")     # fail=stall: two tokens, then it thinks for an hour
    standin.start()
    env = {"OPENAI_BASE_URL": standin.url + "/v1", "OPENAI_API_KEY": "unused", "MODEL": "fail=stall"}
    proc, port, errors = _start(tmp_path, "example:app", loop, env)
    base = f"http://127.0.0.1:{port}"
    try:
        url = base + httpx.post(f"{base}/tokens/streams?prompt=a+b").json()["events_url"]
        lines: list[str] = []
        started = threading.Event()

        def read() -> None:
            with httpx.stream("GET", url, timeout=30) as response:
                for line in response.iter_lines():
                    lines.append(line)
                    if line == "id: 1":
                        started.set()          # two tokens in: the model is now thinking
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        assert started.wait(10), lines
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(GRACE_S + EXIT_MARGIN_S)
        took = time.monotonic() - sent
        reader.join(5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        standin.stop()
    stderr = errors.read_text()
    assert took < GRACE_S + EXIT_MARGIN_S
    assert "Traceback" not in stderr and "CancelledError" not in stderr, stderr
    assert not reader.is_alive()                               # the response ended: the reader is free to resume
    assert "event: done" in lines and any('"stopped_early": true' in line for line in lines), lines


BIG_APP = '''
from tokenwire.asgi import TokenStreams

async def model(request):
    for _ in range(250):
        yield "x" * 60_000      # within MAX_ENTRY_BYTES and (15 MB in all) MAX_ANSWER_BYTES; past any buffer

app = TokenStreams(model, write_timeout_s=1.0)
'''


TCP_ESTABLISHED = 1                 # Linux's TCP states (include/net/tcp_states.h)


def _tcp_state(sock: socket.socket) -> int:
    """The connection's TCP state, from ``TCP_INFO``'s first byte (nothing is read off the socket)."""
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0]


def _drained(sock: socket.socket, limit_s: float) -> bool:
    """Read until the server closes the connection (True) or ``limit_s`` passes with it still open (False)."""
    sock.settimeout(0.5)
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            if not sock.recv(1 << 20):
                return True
        except ConnectionResetError:
            return True
        except TimeoutError:
            continue
    return False


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_reader_that_stops_reading_is_disconnected_at_the_write_timeout(tmp_path: Path, loop: str) -> None:
    (tmp_path / "big.py").write_text(BIG_APP)
    proc, port, errors = _start(tmp_path, "big:app", loop)
    socks: list[socket.socket] = []
    try:
        for _ in range(20):
            made = httpx.post(f"http://127.0.0.1:{port}/streams").json()["events_url"]
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.sendall(f"GET {made} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            socks.append(sock)
        # The readers take nothing; the server gives each up at the write timeout (1 s): seen on this side of
        # the connection, which leaves ESTABLISHED, without a byte read.
        wait_until(lambda: not any(_tcp_state(sock) == TCP_ESTABLISHED for sock in socks),
                   lambda: f"every reader's connection closed; TCP states {[_tcp_state(s) for s in socks]}")
        closed = [_drained(sock, 10.0) for sock in socks]
    finally:
        for sock in socks:
            sock.close()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    stderr = errors.read_text()
    assert all(closed), closed
    assert "ASGI callable returned without completing response" not in stderr, stderr
    assert "Traceback" not in stderr, stderr
