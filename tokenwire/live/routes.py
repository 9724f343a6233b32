"""The live server's routes: what each parsed request gets, an ``Answer`` or an event stream.

How this works: ``Routes.dispatch`` is called by a connection with its
``Request``.  The report pages (``/``, ``/api/report``) are rendered by the
serverless edge's pure ``respond`` in a bounded thread pool, so a 10 ms
render never stalls the streams; ``clock=real`` pages (seconds of real-time
runs, each on a private event loop in its pool thread) have their own small
pool, and past it answer 503 with ``Retry-After`` at once.  The live routes
parse their request with ``params`` (a refusal is a ``RequestError``,
answered as JSON ``{"error": ...}``); an event stream is written by the
stream's writer process (``Stream.serve``) stepped by the server's
event-loop driver, with the connection's ``TransportWire`` as its wire.

Every method on every path has one answer: a path that is not served is a
404 whatever the method, a served path asked with the wrong method a 405
with ``Allow``.  Nothing is created for a refused request: the open-stream
slot (503) and the client's creation quota (429) are taken before a stream
is made.
"""

from __future__ import annotations

import asyncio
from functools import partial
from collections import deque
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from importlib import resources
from typing import Any, Protocol

from ..core.stream import Stream
from ..core.tokenlog import LogError, UnknownStream
from ..handler import REPORT_PATHS, respond
from ..core.frames import DEFAULT_RETRY_MS
from ..report.params import ParamError, parse_query
from ..report.templating import ENV, live_stylesheet
from ..endpoints.config import JOURNAL_SIZE, RETRY_AFTER_S, ConnectionLog, LiveConfig
from .http import Answer, HttpConnection, Request, head_bytes
from ..endpoints.params import LIVE_PARAMS, RequestError, spec_from_query, unknown_stream_message
from ..endpoints.registry import Busy, LiveStream, OverQuota, Registry
from ..endpoints.rules import (
    EVENTS_PATH,
    JSON_HEADERS,
    NO_CONTENT_HEADERS,
    NO_STORE,
    SECURITY_HEADERS,
    SSE_HEADERS,
    busy_error,
    created,
    error_body,
    events_request,
    last_event_id,
    live_allow,
    log_error,
    method_error,
    quota_error,
)
from .sockets import TransportWire, shrink_buffers

__all__ = ["LIVE_CSP", "Routes", "allowed_methods"]

# Where each served path's methods are listed (the 405's Allow; the live paths' are in ``requests``).
_ALLOW_PAGE = "GET, HEAD"
_STATIC = {"live.js": "text/javascript; charset=utf-8", "live.css": "text/css; charset=utf-8"}

# The live page runs only its own script and stylesheet and talks only to
# this origin; nothing may frame it, and no referrer leaves it.
LIVE_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
            "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")


# The live page's model pace when its address names none: slow enough to watch
# tokens arrive (the report's 0.5 ms would land 40 tokens in a blink).
LIVE_PACE_MS = 25



class ServerState(Protocol):
    """What the routes read of their server (``LiveServer`` is one)."""

    registry: Registry
    config: LiveConfig
    journal: deque[ConnectionLog]
    wires: dict[str, TransportWire]
    clock: Any
    driver: Any


def allowed_methods(path: str) -> str | None:
    """Return the ``Allow`` value of a served ``path``, None for a path this server does not serve."""
    allow = live_allow(path)
    if allow is not None:
        return allow
    if path == "/live" or path in REPORT_PATHS or (path.startswith("/static/") and path[8:] in _STATIC):
        return _ALLOW_PAGE
    return None


def json_error(status: int, message: str, headers: tuple[tuple[str, str], ...] = ()) -> Answer:
    """A live endpoint's error: JSON ``{"error": message}``."""
    return Answer(status, (*JSON_HEADERS, *headers), error_body(message))


class Routes:
    """Answer requests for ``server``; pages render in ``pages`` processes, ``clock=real`` pages in ``real_pages``.

    The page processes come from a fork server (a clean process started
    once), not from a fork of the server: they hold none of its sockets, so
    a connection the server closes is closed.  They start on the first page.
    """

    def __init__(self, server: ServerState, *, pages: int, real_pages: int) -> None:
        self.server = server
        context = multiprocessing.get_context("forkserver")
        self.pages = ProcessPoolExecutor(pages, mp_context=context, initializer=_yield_to_streams)
        self.real_pages = ProcessPoolExecutor(real_pages, mp_context=context)
        self.real_limit, self.real_running = real_pages, 0
        self.in_flight = 0                 # pages being rendered (a graceful shutdown waits for them)

    def close(self) -> None:
        """Stop the page processes (pages in flight were waited for by the shutdown).

        Waited for: a pool left to stop by itself races the interpreter's exit,
        whose hook then writes to the pool's closed wake-up pipe (a traceback).
        """
        self.pages.shutdown(wait=True, cancel_futures=True)
        self.real_pages.shutdown(wait=True, cancel_futures=True)

    async def dispatch(self, request: Request, connection: HttpConnection) -> Answer | None:
        """The answer to ``request``, or None once an event stream has taken the connection."""
        try:
            return await self._route(request, connection)
        except RequestError as exc:
            return json_error(exc.status, exc.message, exc.headers)
        except LogError as exc:
            return self._log_failure(exc)

    async def _route(self, request: Request, connection: HttpConnection) -> Answer | None:
        path, method = request.path, request.method
        allow = allowed_methods(path)
        if allow is None:
            return _respond("GET", request.target)        # the report's 404, whatever the method
        if path in REPORT_PATHS and method not in ("GET", "HEAD"):
            return _respond(method, request.target)       # the report's own 405
        if method not in allow.split(", "):
            raise method_error(path, method, allow)
        if path in REPORT_PATHS:
            return await self._page(request.target)
        if path == "/live":
            return self._live_page()
        if path.startswith("/static/"):
            return _static(path[len("/static/"):])
        if path == "/streams":
            return await self._create(request)
        if path == "/stream":
            return await self._stream(request, connection)
        match = EVENTS_PATH.fullmatch(path)
        assert match is not None
        return await self._events(request, connection, await self._lookup(match.group(1)), created=False)

    # -- pages -----------------------------------------------------------------------
    async def _page(self, target: str) -> Answer:
        loop = asyncio.get_running_loop()
        pool = self.pages
        try:
            real = parse_query(target.partition("?")[2].partition("#")[0]).clock == "real"
        except ParamError:
            real = False            # respond() answers the 400 itself
        if real:
            if self.real_running >= self.real_limit:
                raise RequestError(503, f"{self.real_limit} clock=real pages are already running; try again "
                                        f"in {RETRY_AFTER_S} s or use clock=virtual", (("Retry-After", str(RETRY_AFTER_S)),))
            pool = self.real_pages
            self.real_running += 1
        self.in_flight += 1
        try:
            return await loop.run_in_executor(pool, partial(_respond, "GET", target, served_live=True))
        finally:
            self.in_flight -= 1
            if real:
                self.real_running -= 1

    def _live_page(self) -> Answer:
        config = self.server.config
        body = ENV.get_template("live.html").render(
            heartbeat_s=f"{config.heartbeat_s:g}", live_params=", ".join(LIVE_PARAMS),
            retry_after_s=RETRY_AFTER_S, retry_ms=DEFAULT_RETRY_MS, pace_ms=LIVE_PACE_MS).encode()
        return Answer(200, (("Content-Type", "text/html; charset=utf-8"), *SECURITY_HEADERS,
                            ("Content-Security-Policy", LIVE_CSP), *NO_STORE), body)

    # -- streams ---------------------------------------------------------------------
    async def _create(self, request: Request) -> Answer:
        values = request.header_values("transfer-encoding")
        if values:
            raise RequestError(411, "send the parameters in the query string; chunked bodies are refused")
        spec, cut = spec_from_query(request.query)
        registry = self.server.registry
        self._admit_creation(request)
        live = await registry.create_async(spec, cut_after=cut)
        return Answer(201, *created(live.stream_id))

    def _admit_creation(self, request: Request) -> None:
        try:
            self.server.registry.admit_creation(request.client)
        except OverQuota as exc:
            raise quota_error(exc) from None

    async def _stream(self, request: Request, connection: HttpConnection) -> Answer | None:
        spec, cut = spec_from_query(request.query)
        last_event_id(request.header_values("last-event-id"), created=True)   # refused before a stream is made
        registry = self.server.registry
        if registry.live >= registry.max_live:       # nor is one made for a 503
            raise busy_error(Busy(registry.max_live))
        self._admit_creation(request)
        live = await registry.create_async(spec, cut_after=cut)
        return await self._events(request, connection, live, created=True)

    async def _lookup(self, stream_id: str) -> LiveStream:
        try:
            return await self.server.registry.get_async(stream_id)
        except UnknownStream:
            raise RequestError(404, unknown_stream_message(stream_id)) from None

    async def _events(self, request: Request, connection: HttpConnection, live: LiveStream, *,
                      created: bool) -> Answer | None:
        registry, stream_id = self.server.registry, live.stream_id
        asked = events_request(request.query, request.header_values("last-event-id"), live.stream,
                               await registry.length_async(stream_id), created=created)
        await registry.check_cursor_async(stream_id, asked.cursor)    # a 410 now, while a status can say so
        if connection.closed:
            return None                      # the client left while the log was asked
        if asked.complete:
            return Answer(204, NO_CONTENT_HEADERS)
        try:
            self.server.registry.open_slot()
        except Busy as exc:
            raise busy_error(exc) from None
        try:
            self._write_stream(connection, request, live, asked.cursor, live.take_cut(asked.cut), asked.header,
                               asked.query_id)
        except BaseException:
            self.server.registry.close_slot()     # the writer never started: its slot goes back
            connection.close_after(0)
            raise
        return None

    def _write_stream(self, connection: HttpConnection, request: Request, live: LiveStream, cursor: int,
                      cut: int | None, header: str | None, query_id: str | None) -> None:
        server, stream, transport = self.server, live.stream, connection.transport
        assert transport is not None
        config = server.config
        if config.sndbuf is not None:
            shrink_buffers(transport.get_extra_info("socket"), sndbuf=config.sndbuf)
        transport.write(head_bytes(200, SSE_HEADERS))
        connection.log(request, 200, 0)
        wire = TransportWire(transport, connection.loop, write_timeout_s=config.write_timeout_s,
                             sample=config.sample_queues)
        connection.wire = wire
        if config.sample_queues:
            server.wires[stream.stream_id] = wire
            while len(server.wires) > JOURNAL_SIZE:      # bounded like the journal
                server.wires.pop(next(iter(server.wires)))
        channel = stream.new_channel()
        writer = stream.serve(cursor, channel, cut_after=cut, heartbeat_ns=round(config.heartbeat_s * 1e9))
        done = server.driver.spawn(writer, wire)

        def finished(future: asyncio.Future[Any]) -> None:
            server.registry.close_slot()
            ending = future.result() if not future.cancelled() and future.exception() is None else None
            generated = _generated(server.registry, stream)
            if ending is not None:
                server.journal.append(ConnectionLog(
                    stream.stream_id, header, query_id, cursor, cut, ending, wire.snapshot()[1], wire.bytes_sent,
                    generated, wire.failure, channel.stats()))
            else:
                stream.disconnect(channel)       # the writer failed (the log lost the stream): let go of it
            connection.close_after(config.write_timeout_s)
        done.add_done_callback(finished)

    def _log_failure(self, exc: LogError) -> Answer:
        refused = log_error(exc)
        return json_error(refused.status, refused.message, refused.headers)


# How much lower a page process's CPU priority is than the server's: when the
# cores are busy, the streams' loop runs first and a page waits a little.
PAGE_NICENESS = 10


def _yield_to_streams() -> None:
    """A page process's first act: give the streams' loop the CPU first."""
    os.nice(PAGE_NICENESS)


def _respond(method: str, target: str, *, served_live: bool = False) -> Answer:
    status, headers, body = respond(method, target, served_live=served_live)
    return Answer(status, tuple(headers), body)


def _generated(registry: Registry, stream: Stream) -> int:
    """Tokens logged when a connection ended (-1: the log lost the stream), without a blocking call."""
    if registry.aio is not None:           # a shared log is not read here (it would block the loop)
        return max(getattr(stream, "offered", -2) + 1, -1)
    try:
        return registry.log.length(stream.stream_id)
    except LogError:
        return -1


def _static(name: str) -> Answer:
    content_type = _STATIC.get(name)
    if content_type is None:
        raise RequestError(404, f"no static file {name!r}")
    # The live page's stylesheet starts with the report's, so both pages look alike.
    body = live_stylesheet() if name == "live.css" else resources.files("tokenwire.live").joinpath("static", name).read_bytes()
    return Answer(200, (("Content-Type", content_type), *SECURITY_HEADERS, ("Cache-Control", "no-cache")), body)

