"""``tokenwire serve`` as a process a test starts, two ways; no tests here.

- ``served(*flags)`` (``Served``): ``python -m tokenwire serve --port 0`` with stdout kept for the test to read
  line by line (``line``), a descriptor limit (``nofile``), and what ``/proc`` says of it: the connections it
  holds, whether it has read what a client sent (``has_read``), its CPU time.
- ``serve(loop, *flags)`` (``Serve``): the same on a chosen event loop, its stderr read by a thread into
  ``err_lines`` as it comes, for the tests of what it says while it stops.

Each reads its port from the banner and is killed and reaped on exit; every wait is bounded.
"""

from __future__ import annotations

import http.client
import os
import resource
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from support.requirements import ROOT

START_TIMEOUT_S = 30.0
# A request's bound on an answer of Served (a stream's whole answer included) and of Serve.
IO_TIMEOUT_S = 10.0
SERVE_IO_TIMEOUT_S = 30.0
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


class Serve:
    """One ``tokenwire serve --port 0`` process; stderr is read by a thread into ``err_lines``."""

    def __init__(self, loop: str, *flags: str) -> None:
        if loop == "uvloop":
            pytest.importorskip("uvloop", reason="uvloop (the 'fast' extra) is not installed")
        env = {**os.environ, "PYTHONPATH": str(ROOT), "TOKENWIRE_LOOP": loop}
        env.pop("TOKENWIRE_LOG_URL", None)
        self.proc = subprocess.Popen([sys.executable, "-m", "tokenwire", "serve", "--port", "0", *flags],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
        self.err_lines: list[str] = []
        self._err = threading.Thread(target=self._read_err, daemon=True)
        self._err.start()
        banner = self._banner()
        if "serving on http://127.0.0.1:" not in banner:
            self.proc.kill()
            raise AssertionError(f"the server did not start: {banner!r} {self.err_lines!r}")
        self.port = int(banner.split("http://127.0.0.1:")[1].split("/")[0])
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()       # type: ignore[union-attr]

    def _read_err(self) -> None:
        for line in self.proc.stderr:                                           # type: ignore[union-attr]
            self.err_lines.append(line)

    def _banner(self) -> str:
        box: list[str] = []
        reader = threading.Thread(target=lambda: box.append(self.proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(START_TIMEOUT_S)
        return box[0] if box else ""

    def get(self, target: str) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=SERVE_IO_TIMEOUT_S)
        try:
            conn.request("GET", target)
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def wait(self) -> int:
        try:
            code = self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self._err.join(5)
        return code


@contextmanager
def serve(loop: str, *flags: str) -> Iterator[Serve]:
    server = Serve(loop, *flags)
    try:
        yield server
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
        server.wait()
