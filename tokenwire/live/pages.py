"""The report pages' worker processes: pages render away from the streams' loop, and die with the server.

How this works: ``Pages`` owns two ``ProcessPoolExecutor``s: ``pages`` for the
report pages and ``real_pages`` for ``clock=real`` pages (seconds of
real-time runs each), which past ``real_limit`` at once answer 503 with
``Retry-After``.  Their processes come from a fork server (a clean process
started once, not a fork of the server: they hold none of its sockets, so a
connection the server closes is closed) and start on the first page.

However the server dies (SIGTERM, or SIGKILL, the OOM killer, a crash, where
none of its code runs to clean up), its helpers die with it: the fork server
first imports ``forkserver_init``, which asks Linux to SIGKILL it when the
server dies (``PR_SET_PDEATHSIG``); each worker asks the same of the fork
server, its parent, in its pool initializer; and multiprocessing's resource
tracker exits by itself once the last of them has closed its pipe.  The race
where the parent has died before the request is checked just after it.  A
pool whose worker died anyway (``BrokenProcessPool``) is replaced and the
page tried once more.
"""

from __future__ import annotations

import asyncio
import ctypes
import multiprocessing
import os
import signal
import sys
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from functools import partial

from ..endpoints.config import RETRY_AFTER_S
from ..endpoints.decisions import Answer
from ..endpoints.params import RequestError
from ..handler import respond
from ..report.params import ParamError, parse_query

__all__ = ["PAGE_NICENESS", "SERVER_PID_ENV", "Pages", "die_with_parent", "preload_fork_server"]

# How much lower a page process's CPU priority is than the server's: when the
# cores are busy, the streams' loop runs first and a page waits a little.
PAGE_NICENESS = 10
# Where the fork server finds the server's pid (to tell whether it died before the fork server asked to die with it).
SERVER_PID_ENV = "TOKENWIRE_PAGES_SERVER_PID"
# linux/prctl.h: the signal a process gets when its parent dies.
_PR_SET_PDEATHSIG = 1
# The fork server's pid, set in the fork server (and so known to the workers it forks).
_fork_server_pid: int | None = None


class Pages:
    """The page processes: ``pages`` workers for report pages, ``real_pages`` for ``clock=real`` ones."""

    def __init__(self, pages: int, real_pages: int) -> None:
        os.environ[SERVER_PID_ENV] = str(os.getpid())
        self.context = multiprocessing.get_context("forkserver")
        self.context.set_forkserver_preload(["__main__", "tokenwire.live.forkserver_init"])
        self.sizes = (pages, real_pages)
        self.pages, self.real_pages = self._pool(real=False), self._pool(real=True)
        self.real_limit, self.real_running = real_pages, 0
        self.in_flight = 0                 # pages being rendered (a graceful shutdown waits for them)

    def _pool(self, *, real: bool) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(self.sizes[real], mp_context=self.context, initializer=_page_worker,
                                   initargs=(0 if real else PAGE_NICENESS, os.getpid()))

    def close(self) -> None:
        """Stop the page processes (pages in flight were waited for by the shutdown).

        Waited for: a pool left to stop by itself races the interpreter's exit,
        whose hook then writes to the pool's closed wake-up pipe (a traceback).
        """
        self.pages.shutdown(wait=True, cancel_futures=True)
        self.real_pages.shutdown(wait=True, cancel_futures=True)

    async def render(self, target: str) -> Answer:
        """The report page (or its 400) for ``target``, rendered in a page process.

        Raises ``RequestError`` (503) when ``real_limit`` ``clock=real`` pages are already running.
        """
        try:
            real = parse_query(target.partition("?")[2].partition("#")[0]).clock == "real"
        except ParamError:
            real = False            # respond() answers the 400 itself
        if real and self.real_running >= self.real_limit:
            raise RequestError(503, f"{self.real_limit} clock=real pages are already running; try again in "
                                    f"{RETRY_AFTER_S} s or use clock=virtual", (("Retry-After", str(RETRY_AFTER_S)),))
        self.real_running += real
        self.in_flight += 1
        try:
            return await self._run(target, real=real)
        finally:
            self.in_flight -= 1
            self.real_running -= real

    async def _run(self, target: str, *, real: bool) -> Answer:
        loop = asyncio.get_running_loop()
        job = partial(_page, target)
        pool = self.real_pages if real else self.pages
        try:
            return await loop.run_in_executor(pool, job)
        except BrokenProcessPool:           # a worker was killed: a new pool, and one more try
            if pool is (self.real_pages if real else self.pages):
                pool.shutdown(wait=False, cancel_futures=True)
                if real:
                    self.real_pages = self._pool(real=True)
                else:
                    self.pages = self._pool(real=False)
            return await loop.run_in_executor(self.real_pages if real else self.pages, job)


def _page(target: str) -> Answer:
    status, headers, body = respond("GET", target, served_live=True)
    return Answer(status, tuple(headers), body)


def _page_worker(niceness: int, server_pid: int) -> None:
    """A page process's first acts: die with its parent, and give the streams' loop the CPU first."""
    die_with_parent(_fork_server_pid or os.getppid(), server_pid)
    os.nice(niceness)


def preload_fork_server(server_pid: int) -> None:
    """The fork server's first act (``forkserver_init``): die with the server, its parent."""
    global _fork_server_pid
    die_with_parent(server_pid, server_pid)
    _fork_server_pid = os.getpid()


def die_with_parent(parent_pid: int, server_pid: int) -> None:
    """Ask Linux to SIGKILL this process when its parent dies (elsewhere a no-op); exit now if it is too late.

    Too late: this process's parent is no longer ``parent_pid`` (it died and
    this process was re-parented before it asked), or the server is gone.
    SIGINT is ignored from here on: a terminal's Ctrl-C reaches the whole
    process group, and the server decides (it stops the pools itself); the
    fork server's workers inherit the setting from their first instant.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            return                          # not allowed here: nothing more to do
    if os.getppid() != parent_pid or not _alive(server_pid):
        os._exit(0)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True                         # a process of another user has the pid: alive
    return True
