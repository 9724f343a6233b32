"""Helpers for the ASGI tests: a uvicorn process on loopback, and reading its streams; this module holds no tests.

``Uvicorn(target)`` runs ``python -m uvicorn <target>`` (uvloop, or the
loop ``TOKENWIRE_LOOP`` names as the ``loop_kind`` fixture sets it;
httptools, as the bench does; ``--app-dir tests`` so ``support.apps.fake_model`` imports)
on a free port and stops it with SIGTERM; its stderr is kept to look at.
``read_stream`` reads an SSE response with httpx-sse until ``done`` or
``failed`` (or ``stop_after`` tokens).  Every wait is bounded (``support.live.wait_until`` for the rest).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from httpx_sse import ServerSentEvent, connect_sse

from support.processes import stop, wait_ready
from support.requirements import ROOT, free_port

TIMEOUT_S = 10.0
# The bound on a uvicorn's start-up (its imports, on a machine busy with the other tests' workers): ended by the
# first answer, so it costs nothing when the start is quick.
START_TIMEOUT_S = 30.0


class Uvicorn:
    """One uvicorn process serving ``target`` on 127.0.0.1 with the ``http`` parser; ``url`` is its base URL."""

    def __init__(self, target: str, env: dict[str, str] | None = None, app_dir: Path = ROOT / "tests",
                 http: str = "httptools") -> None:
        self.target, self.port, self.app_dir, self.http = target, free_port(), app_dir, http
        self.env = {**os.environ, **(env or {})}
        self.errors = tempfile.TemporaryFile()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", self.target, "--app-dir", str(self.app_dir), "--host", "127.0.0.1",
             "--port", str(self.port), "--loop", self.env.get("TOKENWIRE_LOOP", "uvloop"), "--http", self.http,
             "--log-level", "warning", "--no-access-log", "--timeout-graceful-shutdown", "2"],
            cwd=ROOT, env=self.env, stdout=subprocess.DEVNULL, stderr=self.errors)
        wait_ready(self.proc, self._listening, f"uvicorn on port {self.port}", START_TIMEOUT_S, self.stderr)

    def _listening(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                return True
        except OSError:
            return False

    def stop(self, sig: int = signal.SIGTERM) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            stop(proc, sig, TIMEOUT_S)

    def stderr(self) -> str:
        self.errors.seek(0)
        return self.errors.read().decode(errors="replace")


@contextmanager
def uvicorn(target: str, env: dict[str, str] | None = None, app_dir: Path = ROOT / "tests",
            http: str = "httptools") -> Iterator[Uvicorn]:
    server = Uvicorn(target, env, app_dir, http)
    server.start()
    try:
        yield server
    finally:
        server.stop()
        server.errors.close()


@dataclass
class Read:
    """What one connection read: its status, events (pings not included), and how it ended."""

    status: int
    events: list[ServerSentEvent] = field(default_factory=list)

    @property
    def tokens(self) -> list[ServerSentEvent]:
        return [e for e in self.events if e.event == "token"]

    @property
    def ids(self) -> list[int]:
        return [int(e.id) for e in self.tokens]

    @property
    def text(self) -> str:
        return "".join(e.data for e in self.tokens)

    @property
    def last(self) -> ServerSentEvent:
        return self.events[-1]

    def last_json(self) -> Any:
        return json.loads(self.last.data)


def read_stream(url: str, headers: dict[str, str] | None = None, stop_after: int | None = None,
                timeout_s: float = TIMEOUT_S, first_token: threading.Event | None = None) -> Read:
    """Read the SSE stream at ``url`` to its end (or ``stop_after`` tokens, then hang up).

    ``first_token`` is set when the first token arrives (another thread waits for it to act mid-stream).
    """
    with (httpx.Client(timeout=timeout_s) as client,
          connect_sse(client, "GET", url, headers=dict(headers or {})) as source):
        read = Read(source.response.status_code)
        if read.status != 200:
            return read
        for event in source.iter_sse():
            read.events.append(event)
            if first_token is not None and event.event == "token":
                first_token.set()
            if stop_after is not None and len(read.tokens) >= stop_after:
                break
    return read

