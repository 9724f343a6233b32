"""A server process a test starts and stops: waited until it answers, stopped for sure; no tests here.

How this works: ``wait_ready`` polls ``ready()`` (a connect, a ``PING``)
until it says yes, the process exits (the error names it, with what it
wrote on stderr) or the bound passes (the process is stopped, and the
error says so); ``stop`` sends a signal, waits, and kills what did not
exit.  ``support.asgi.Uvicorn`` and ``support.redis.RedisServer`` are
both started and stopped this way.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable

__all__ = ["stop", "wait_ready"]

# How often a starting server is asked whether it answers yet.
POLL_S = 0.02


def wait_ready(proc: subprocess.Popen[bytes], ready: Callable[[], bool], what: str, timeout_s: float,
               stderr: Callable[[], str]) -> None:
    """Return once ``ready()``; raises ``RuntimeError`` naming ``what`` if ``proc`` exits or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}: {stderr().strip()}")
        if ready():
            return
        time.sleep(POLL_S)
    stop(proc, signal.SIGTERM, timeout_s)
    raise RuntimeError(f"{what} did not answer within {timeout_s} s: {stderr().strip()}")


def stop(proc: subprocess.Popen[bytes], sig: int, timeout_s: float) -> None:
    """Send ``sig`` and wait for the exit; a process still there after ``timeout_s`` is killed."""
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout_s)
