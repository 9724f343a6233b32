"""A ``python -m tokenwire`` command as a process a test starts: what it said, its CPU time; no tests here.

How this works: ``Tokenwire(argv)`` runs ``python -m tokenwire <argv>`` in
a process group of its own, threads read its stdout and stderr into one
transcript (``output``), and it is waited until it says its banner
(``listening``, whose first group is the port).  ``cpu_s`` is the CPU time
the process has used so far (user + system, from ``/proc``: the kernel's
count, whatever the machine's load), so a test can compare it with the
wall time of a window, an invariant ratio.  ``interrupt`` sends SIGINT to
the group, as Ctrl-C does.  ``refused(argv)`` runs a command that must not
start and returns its exit status and stderr.  Every wait is bounded.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from support.live import wait_until
from support.requirements import ROOT

__all__ = ["SERVING", "Tokenwire", "refused", "running_tokenwire", "tokenwire_env"]

# How long a command may take to say its banner, or to exit once told to.
TIMEOUT_S = 20.0
# What ``tokenwire serve`` and ``tokenwire proxy`` say once they listen, the port as the first group.
SERVING = re.compile(r"serving on http://127\.0\.0\.1:(\d+)/")
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def tokenwire_env(**extra: str) -> dict[str, str]:
    """The environment of a tokenwire process: this checkout importable, no log URL unless ``extra`` sets one."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **extra}
    for name in ("TOKENWIRE_LOG_URL", "TOKENWIRE_TEST_LOG"):
        if name not in extra:
            env.pop(name, None)
    return env


class Tokenwire:
    """One ``python -m tokenwire`` process; ``port`` is what its banner said, ``output()`` all it said."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None,
                 listening: re.Pattern[str] = SERVING) -> None:
        self._said: list[str] = []
        self._lock = threading.Lock()
        self.proc = subprocess.Popen([sys.executable, "-m", "tokenwire", *argv], cwd=ROOT,
                                     env=env or tokenwire_env(), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, start_new_session=True)
        self._readers = [threading.Thread(target=self._read, args=(pipe,), daemon=True)
                         for pipe in (self.proc.stdout, self.proc.stderr)]
        for reader in self._readers:
            reader.start()
        self.port = int(self.wait_for(listening).group(1))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _read(self, pipe: IO[str]) -> None:
        for line in pipe:
            with self._lock:
                self._said.append(line)

    def output(self) -> str:
        with self._lock:
            return "".join(self._said)

    def lines(self) -> int:
        with self._lock:
            return len(self._said)

    def wait_for(self, pattern: re.Pattern[str], timeout_s: float = TIMEOUT_S) -> re.Match[str]:
        """The first match of ``pattern`` in what the process said, once it says it."""
        def said() -> re.Match[str] | None:
            match = pattern.search(self.output())
            if match is None and self.proc.poll() is not None and not any(r.is_alive() for r in self._readers):
                raise AssertionError(f"exited without saying {pattern.pattern!r}: {self.output()!r}")
            return match
        return wait_until(said, lambda: f"{pattern.pattern!r} said; it said {self.output()!r}", timeout_s)

    def cpu_s(self) -> float:
        """The CPU time (user + system, every thread) the process has used so far, in seconds."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS     # utime, stime (fields 14, 15)

    def interrupt(self) -> int:
        """SIGINT to the whole process group, as a terminal's Ctrl-C; returns the exit status."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
        try:
            code = self.proc.wait(TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            code = self.proc.wait()
        for reader in self._readers:
            reader.join(5)
        return code


@contextmanager
def running_tokenwire(argv: list[str], env: dict[str, str] | None = None,
                      listening: re.Pattern[str] = SERVING) -> Iterator[Tokenwire]:
    """A ``Tokenwire`` process, interrupted (and waited for) on exit."""
    process = Tokenwire(argv, env, listening)
    try:
        yield process
    finally:
        process.interrupt()


def refused(argv: list[str], env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """Run ``python -m tokenwire <argv>``, which must exit by itself; returns its status, stdout and stderr."""
    done = subprocess.run([sys.executable, "-m", "tokenwire", *argv], cwd=ROOT, env=env or tokenwire_env(),
                          capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    return done.returncode, done.stdout, done.stderr
