"""The live server (``LiveServer``): the report pages and the live SSE endpoints on one event loop, in one thread.

How this works: ``LiveServer`` binds its listening socket when it is made
(so the port is known at once), and ``serve_forever`` runs an event loop
(uvloop's when installed) in the calling thread until ``shutdown``: every
connection is an ``HttpConnection`` (``http``), every request is answered by
``Routes`` (``routes``), and every writer and producer is a process stepped
by one ``LoopDriver`` (``tokenwire.realtime``).  The server holds what the
connections share: the registry of streams (and through it the token log),
the ``LiveConfig`` and a bounded journal of finished connections.

A cap on open connections (``max_connections``, and what the descriptor limit
leaves) gives a new connection the slot of the oldest one that has not sent a
complete request line (``idle``, oldest first: a slowloris cannot keep the
server full) and answers 503 only when none is idle.  When
``accept`` fails for lack of file descriptors (``EMFILE``/``ENFILE``), the
loop stops accepting for a second and tries again (asyncio's own rule), one
line is logged, and nothing spins.  ``shutdown(grace_s)`` stops accepting,
lets pages in flight finish and open streams run to their ``done`` for up to
``grace_s``, then closes the rest (each after the frame it was writing);
SIGTERM and SIGINT do that with the configured grace (``tokenwire serve``,
in ``command``, then exits 0).  Before the loop closes, what still runs on
it is ended there (``_quiesce``), so nothing is left to a closed loop.

Routes (the README lists the status codes):

- ``POST /streams?<report parameters>[&cut_after=k]`` -> 201 JSON
  ``{"stream_id", "events_url"}``.
- ``GET /streams/<id>/events[?last_event_id=n][&cut_after=k]`` -> the SSE
  stream.  The ``Last-Event-ID`` header wins over ``?last_event_id=``.
- ``GET /stream?<report parameters>[&cut_after=k]`` -> create and stream in
  one request (for ``curl -N``).
- ``GET /live`` and ``GET /static/live.{js,css}`` -> the EventSource page.
- ``GET /`` and ``GET /api/report`` -> the report.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import resource
import signal
import threading
import time
from collections import OrderedDict, deque
from typing import Any

from ..endpoints.config import (
    PAGE_PROCESSES,
    REAL_PAGES,
    REQUEST_QUEUE_SIZE,
    ConnectionLog,
    LiveConfig,
)
from ..endpoints.decide import Endpoints, logger, process_error
from ..endpoints.metering import Meter
from ..endpoints.registry import Registry
from ..endpoints.routes import LIVE_ROUTES, RouteTable
from ..realtime import LoopDriver, new_loop
from .http import Answer, HttpConnection, Request
from .memory import Trimmer
from .routes import Routes
from .sockets import TransportWire, listening

__all__ = ["LiveServer", "make_server"]

access_logger = logger.getChild("access")

# Connections asyncio accepts per wake-up of the listening socket (its `backlog`
# argument, which is also how often it retries a failing accept in a row).
# A quarter of the descriptor margin, so accept does not run out of descriptors.
ACCEPT_BATCH = 16
# Descriptors kept free beyond the connections: page workers' pipes, Redis
# connections, files, the 503 a refused connection is answered with, and the
# stdlib loop's accept pipeline: a batch is counted (admitted, refused, or
# given an idle connection's slot) an iteration or two after it was accepted,
# and a connection shed or refused is closed an iteration after that, so
# about three batches are open and not counted.  Under a slowloris churn at
# the limit (ulimit -n 1024) 32 ran out of descriptors; 64 does not.
FD_MARGIN = 64
# How often a graceful shutdown looks whether everything has ended.
_DRAIN_POLL_S = 0.02
# Rounds of cancelling what is left on the loop at exit (a cancelled task may start one more).
_QUIESCE_ROUNDS = 5
# What a connection closed at the end of the grace gets to flush its last frame.
_FLUSH_S = 1.0


class LiveServer:
    """The live server: a bound socket, the shared state, and the loop that serves them (``serve_forever``)."""

    def __init__(self, address: tuple[str, int], *, registry: Registry | None = None,
                 config: LiveConfig | None = None, routes: RouteTable = LIVE_ROUTES, metrics: bool = True) -> None:
        self.registry = registry if registry is not None else Registry()   # an empty Registry is falsy
        self.config = config if config is not None else LiveConfig()
        self.endpoints = Endpoints(self.registry, self.config, routes=routes, meter=Meter() if metrics else None)
        self.route_table = self.endpoints.routes     # what the HTTP layer's early checks read
        self.wires: dict[str, TransportWire] = {}     # latest wire per stream, kept only when sampling
        self.clock = self.registry.clock
        self.driver: LoopDriver | None = None
        self.connections: set[HttpConnection] = set()
        # Connections that have not sent a complete request line, oldest first: when the server is
        # full, a new connection takes the slot of the first of them (O(1) to add, find and remove).
        self.idle: OrderedDict[HttpConnection, None] = OrderedDict()
        self.fd_cap = 1 << 30                   # set when serving starts (_descriptor_cap)
        self._last_accept_error = 0.0
        self.socket = listening(*address, REQUEST_QUEUE_SIZE)
        self.socket.setblocking(False)
        self.routes: Routes | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Future[float] | None = None
        self._finished = threading.Event()      # set when serve_forever has returned
        self._shutdown_asked: float | None = None
        self.trimmer: Trimmer | None = None     # made with the loop: gives large bodies' memory back

    @property
    def journal(self) -> deque[ConnectionLog]:
        """The last finished event-stream connections (``JOURNAL_SIZE``), oldest first."""
        return self.endpoints.journal

    @property
    def address(self) -> tuple[str, int]:
        """The ``(host, port)`` actually bound (port 0 resolved)."""
        host, port = self.socket.getsockname()[:2]
        return str(host), int(port)

    @property
    def server_address(self) -> tuple[str, int]:
        """``socketserver``'s name for ``address``."""
        return self.address

    @property
    def url(self) -> str:
        """The base URL, with the port actually bound (an IPv6 host in brackets)."""
        host, port = self.address
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    # -- running ---------------------------------------------------------------------
    def serve_forever(self, *, signals: bool = False) -> None:
        """Serve in this thread until ``shutdown`` (or, with ``signals``, SIGTERM/SIGINT)."""
        if self._shutdown_asked is not None:    # shutdown() came first
            self._finished.set()
            return
        loop = new_loop()
        self._finished.clear()
        try:
            loop.run_until_complete(self._serve(loop, signals))
        finally:
            loop.run_until_complete(self._quiesce())
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
            self._finished.set()

    async def _serve(self, loop: asyncio.AbstractEventLoop, signals: bool) -> None:
        self._loop = loop
        loop.set_exception_handler(self._loop_error)
        self.driver = LoopDriver(loop, self.clock, on_error=process_error, spawn_hook=self.registry.spawn)
        self.registry.driver = self.driver
        self.routes = Routes(self, pages=PAGE_PROCESSES, real_pages=REAL_PAGES)
        self.trimmer = Trimmer(loop)
        # asyncio accepts up to `backlog` connections per wake-up and, when accept fails
        # with EMFILE, goes on trying (and scheduling a retry) that many times: keep that
        # batch small, and give the kernel's queue its full size after (listen again).
        server = await loop.create_server(lambda: HttpConnection(self, loop), sock=self.socket,
                                          backlog=ACCEPT_BATCH)
        self.socket.listen(REQUEST_QUEUE_SIZE)
        self.fd_cap = _descriptor_cap()
        self._stop = loop.create_future()
        if self._shutdown_asked is not None:
            self._stop.set_result(self._shutdown_asked)
        if signals:
            self.stop_on_signals()
        try:
            grace_s = await self._stop
            server.close()                       # stop accepting
            self._say_stopping(grace_s)
            await self._drain(grace_s)
        finally:
            self.routes.close()
            self.trimmer.close()

    async def _quiesce(self) -> None:
        """End what still runs on the loop before it closes, quietly: the stream processes past the grace
        (their cleanup runs now, on the loop), the tasks they awaited, then the token log's connections."""
        if self.driver is not None:
            self.driver.close()
        for _ in range(_QUIESCE_ROUNDS):          # cancelling one task can start another (a last log write)
            tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            if not tasks:
                break
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        close = getattr(self.registry.aio, "close", None)
        if close is not None:
            with contextlib.suppress(Exception):
                await close()

    def shutdown(self, grace_s: float = 0.0) -> None:
        """Stop ``serve_forever`` (from another thread) and wait for it to return: streams get ``grace_s``.

        As ``socketserver``'s: called before ``serve_forever`` has started, it
        waits for it to start and stop at once.
        """
        self._shutdown_asked = grace_s
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(_settle, stop, grace_s)
            except RuntimeError:
                pass                            # the loop closed meanwhile: it has stopped
        self._finished.wait(grace_s + 60)

    def server_close(self) -> None:
        """Close the listening socket (after ``shutdown``, or instead of serving)."""
        self.socket.close()

    def __enter__(self) -> LiveServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.server_close()

    def stop_on_signals(self) -> None:
        """SIGTERM and SIGINT shut down gracefully (``config.grace_s``); call from the loop's thread."""
        assert self._loop is not None and self._stop is not None
        stop = self._stop
        for sig in (signal.SIGTERM, signal.SIGINT):
            self._loop.add_signal_handler(sig, _settle, stop, self.config.grace_s)

    async def _drain(self, grace_s: float) -> None:
        for conn in list(self.connections):
            if not conn.busy:
                conn.close_after(0)              # requests still arriving: nothing to finish
        deadline = time.monotonic() + grace_s
        while any(c.busy for c in self.connections) and time.monotonic() < deadline:
            await asyncio.sleep(_DRAIN_POLL_S)
        assert self.routes is not None
        while self.routes.in_flight and time.monotonic() < deadline + grace_s + 5:
            await asyncio.sleep(_DRAIN_POLL_S)   # a page in flight is answered, even past the grace
        for conn in list(self.connections):
            conn.close_after(_FLUSH_S)
        end = time.monotonic() + _FLUSH_S
        while self.connections and time.monotonic() < end:
            await asyncio.sleep(_DRAIN_POLL_S)

    def _say_stopping(self, grace_s: float) -> None:
        """One line on stderr (unless ``--quiet``) when a shutdown has open streams to wait for."""
        streams = self.registry.live
        if streams and self.config.access_log:
            logger.warning("stopping: waiting up to %g s for %d open stream%s to finish", grace_s, streams,
                           "s" if streams != 1 else "")

    # -- what connections call ---------------------------------------------------------
    def admit(self, connection: HttpConnection) -> bool:
        """Count ``connection``; when the server is full it takes an idle one's slot, or False if none is idle.

        When the server is full, the oldest connection that has not sent a
        complete request line is closed and ``connection`` takes its slot (the
        slowloris defence: a client holding idle connections cannot keep out
        one that sends its request at once); a connection that has sent its
        request is never closed for this.  With no idle connection, False
        (503, then close): refusing before the process runs out of file
        descriptors means ``accept`` never fails with EMFILE in the first place.
        """
        self.connections.add(connection)
        if len(self.connections) > min(self.config.max_connections, self.fd_cap) and not self._shed_idle():
            return False
        self.idle[connection] = None
        return True

    def _shed_idle(self) -> bool:
        """Close the oldest connection that has not sent its request line; False if there is none."""
        while self.idle:
            oldest, _ = self.idle.popitem(last=False)
            if not oldest.closed:                # one already closing frees its slot by itself
                self.connections.discard(oldest)
                oldest.shed()
                return True
        return False

    def requested(self, connection: HttpConnection) -> None:
        """``connection`` has sent a complete request line: it is never shed."""
        self.idle.pop(connection, None)

    def forget(self, connection: HttpConnection) -> None:
        self.connections.discard(connection)
        self.idle.pop(connection, None)
        if self.trimmer is not None:
            self.trimmer.released(connection.body_size)

    async def dispatch(self, request: Request, connection: HttpConnection) -> Answer | None:
        assert self.routes is not None
        return await self.routes.dispatch(request, connection)

    def access(self, line: str) -> None:
        if self.config.access_log:
            access_logger.info(line)

    # -- errors: one line each, never a traceback --------------------------------------------
    def _loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if isinstance(exc, (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)):
            return                               # a client went away: not an error
        if isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
            now = time.monotonic()
            if now - self._last_accept_error >= 1.0:        # one line a second, however many accepts failed
                self._last_accept_error = now
                logger.error("cannot accept: %s; pausing accepts for a second", exc.strerror)
            return
        detail = f"{type(exc).__name__}: {exc}" if exc is not None else str(context.get("message"))
        logger.error("%s", detail)


def _descriptor_cap() -> int:
    """Connections this process can hold: its descriptor limit, less what it has open and a margin."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY:
        return 1 << 30
    try:
        in_use = len(os.listdir("/proc/self/fd"))
    except OSError:
        in_use = 64                          # no /proc: assume a few dozen
    return max(1, soft - in_use - FD_MARGIN)


def _settle(stop: asyncio.Future[float], grace_s: float) -> None:
    if not stop.done():
        stop.set_result(grace_s)


def make_server(host: str = "127.0.0.1", port: int = 0, *, registry: Registry | None = None,
                config: LiveConfig | None = None, routes: RouteTable = LIVE_ROUTES, metrics: bool = True) -> LiveServer:
    """Bind a ``LiveServer`` serving ``routes`` (port 0 picks a free one); raises ``OSError`` if it cannot bind.

    ``metrics``: count what ``GET /metrics`` reports (False: it answers 404).
    """
    return LiveServer((host, port), registry=registry, config=config, routes=routes, metrics=metrics)
