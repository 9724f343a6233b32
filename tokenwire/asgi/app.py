"""``TokenStreams``: the live routes of ``tokenwire serve`` as an ASGI 3 app, fed by the canned answer or your model.

How this works: every request is read from its scope (``scope``), checked
with the same pure functions as ``tokenwire serve``'s routes
(``tokenwire.live.params`` and ``tokenwire.live.requests``), and refused with
the same status, JSON message and headers.  Streams live in the same
``Registry`` (ids, the open-stream slots, the creation quota, the token log);
their writer and producer processes run on a ``LoopDriver`` made on the
server's event loop at the first request (or at lifespan startup), and each
response's frames go out through an ``AsgiWire`` written by the request's own
task.  Without a model, a stream is the canned answer with the report's
parameters, exactly as ``tokenwire serve`` makes it; with one, the model
factory is called per stream with a ``StreamRequest`` and its tokens make a
``ModelStream``.

Mounted in a Starlette or FastAPI app, the routes answer under the mount
point and the ``events_url`` of a new stream starts with ``root_path``.  A
mounted app gets no lifespan events (Starlette keeps them), so everything
starts lazily; ``lifespan`` is a context manager to hand to the parent app
so that shutdown stops the models.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from ..core.channel import BoundedChannel, check_capacity, parse_policy
from ..core.effects import TokenItem
from ..core.pipeline import RunSpec
from ..core.stream import OnDisconnect, Stream
from ..core.tokenlog import DEFAULT_MAX_STREAMS, LogError
from ..live.config import DEFAULT_HEARTBEAT_S, DEFAULT_WRITE_TIMEOUT_S, MAX_BODY_BYTES, LiveConfig
from ..live.http import KNOWN_METHODS
from ..live.params import RequestError, cut_range_message, echo, parse_count, spec_from_query, split_query
from ..live.registry import (
    DEFAULT_CREATE_BURST,
    DEFAULT_CREATE_RATE,
    DEFAULT_MAX_LIVE,
    STREAM_ID_BYTES,
    Busy,
    LiveStream,
    OverQuota,
    Registry,
)
from ..live import requests as rules
from ..live.shared_stream import make_registry
from ..realtime import LoopDriver
from . import scope as asgi
from .model_stream import MAX_MODEL_TOKENS, ModelFactory, ModelStream, StreamRequest, open_source
from .wire import AsgiWire, Receive, Send

__all__ = ["TokenStreams"]

logger = logging.getLogger("tokenwire.asgi")
_SSE = asgi.asgi_headers(rules.SSE_HEADERS)
_ROUTES = "the routes here are POST /streams, GET /streams/<id>/events and GET /stream"


class _Registry(Registry):
    """The live registry, which also takes streams made elsewhere (a model's)."""

    def add(self, stream: Stream, spec: RunSpec, cut_after: int | None) -> LiveStream:
        """Keep ``stream`` under its id; returns its ``LiveStream``."""
        return self._remember(LiveStream(stream, spec, cut_after))


@dataclass(frozen=True, slots=True)
class _Asked:
    """A create request, parsed: the canned answer's spec, or the model's parameters; and its ``cut_after``."""

    spec: RunSpec | None
    params: dict[str, str]
    cut: int | None


class TokenStreams:
    """An ASGI 3 app serving ``POST /streams``, ``GET /streams/<id>/events`` and ``GET /stream``.

    ``model``: a factory called once per stream with a ``StreamRequest``,
    returning an async iterator of ``str`` (or an awaitable of one); None
    serves the canned answer with the report's parameters.  For a model,
    ``policy`` and ``buffer`` are its channel's and ``on_disconnect`` what a
    reader leaving does (``detach``: the model keeps logging; ``cancel``: it
    is stopped).  ``log``: ``"memory"`` or a ``redis://`` URL (None: the
    ``TOKENWIRE_LOG_URL`` environment variable, else memory); a model's
    streams are in memory for now (a shared log for them is refused).  The limits
    are ``tokenwire serve``'s, with the same defaults.  Raises
    ``TypeError``/``ValueError`` naming a bad argument.
    """

    def __init__(self, model: ModelFactory | None = None, *, log: str | None = None, policy: str = "block",
                 buffer: int = 4, on_disconnect: str = "detach", heartbeat_s: float = DEFAULT_HEARTBEAT_S,
                 write_timeout_s: float = DEFAULT_WRITE_TIMEOUT_S, max_live: int = DEFAULT_MAX_LIVE,
                 max_streams: int = DEFAULT_MAX_STREAMS, create_burst: int = DEFAULT_CREATE_BURST,
                 create_rate: float = DEFAULT_CREATE_RATE, max_body_bytes: int = MAX_BODY_BYTES) -> None:
        if model is not None and not callable(model):
            raise TypeError(f"model must be a callable that returns an async iterator of str, got {model!r}")
        if model is not None and log not in (None, "", "memory"):
            raise ValueError(f"a shared log is not supported for your own model yet (the canned answer takes one); "
                             f"got log={log!r}")
        if isinstance(max_body_bytes, bool) or not isinstance(max_body_bytes, int) or max_body_bytes < 0:
            raise ValueError(f"max_body_bytes must be a non-negative int, got {max_body_bytes!r}")
        self.model = model
        self.policy, self.buffer = parse_policy(policy), check_capacity(buffer)
        try:
            self.on_disconnect = OnDisconnect(on_disconnect)
        except ValueError:
            raise ValueError(f"on_disconnect must be 'detach' or 'cancel', got {on_disconnect!r}") from None
        self.config = LiveConfig(heartbeat_s=heartbeat_s, write_timeout_s=write_timeout_s)
        self.max_body_bytes = max_body_bytes
        limits: dict[str, Any] = dict(max_live=max_live, max_streams=max_streams, create_burst=create_burst,
                                      create_rate=create_rate)
        self.registry: Registry = make_registry(log, **limits) if model is None else _Registry(**limits)
        self.driver: LoopDriver | None = None
        self._models: weakref.WeakSet[ModelStream] = weakref.WeakSet()

    # -- ASGI --------------------------------------------------------------------------
    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            await self._http(scope, receive, send)
        elif kind == "lifespan":
            await self._lifespan(receive, send)
        else:
            raise ValueError(f"tokenwire.asgi serves http (and lifespan), not a {kind!r} scope")

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self._driver()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                self.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    @contextlib.asynccontextmanager
    async def lifespan(self, app: object = None) -> AsyncIterator[None]:
        """A lifespan for the app this one is mounted in (``FastAPI(lifespan=streams.lifespan)``)."""
        self._driver()
        try:
            yield
        finally:
            self.close()

    def close(self) -> None:
        """Stop every model still generating (their readers get the early ``done``)."""
        for stream in list(self._models):
            if stream.producer_running:
                stream.stop()

    def _driver(self) -> LoopDriver:
        loop = asyncio.get_running_loop()
        if self.driver is None or self.driver.loop is not loop:
            self.driver = LoopDriver(loop, self.registry.clock, on_error=_process_error,
                                     spawn_hook=self.registry.spawn)
            self.registry.driver = self.driver
        return self.driver

    # -- routes ---------------------------------------------------------------------------
    async def _http(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        try:
            await self._route(scope, receive, send)
        except RequestError as exc:
            await asgi.error(send, exc)
        except LogError as exc:
            await asgi.error(send, rules.log_error(exc))

    async def _route(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        method, path = str(scope["method"]), asgi.route_path(scope)
        if method not in KNOWN_METHODS:
            raise RequestError(501, f"method {method[:20]!r} is not implemented here")
        allow = rules.live_allow(path)
        if allow is None:
            raise RequestError(404, f"no such path {echo(path)}: {_ROUTES}")
        if method not in allow.split(", "):
            raise rules.method_error(path, method, allow)
        self._driver()
        if path == "/streams":
            await self._create(scope, receive, send)
        elif path == "/stream":
            asked = self._parse(asgi.query(scope))
            rules.last_event_id(asgi.header_values(scope, b"last-event-id"), created=True)
            if self.registry.live >= self.registry.max_live:     # no stream is made for a 503
                raise rules.busy_error(Busy(self.registry.max_live))
            live = await self._make(asked, scope, b"")
            await self._events(scope, receive, send, live, created=True)
        else:
            match = rules.EVENTS_PATH.fullmatch(path)
            assert match is not None
            await self._events(scope, receive, send, await self.registry.get_async(match.group(1)), created=False)

    async def _create(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if asgi.header_values(scope, b"transfer-encoding"):
            raise RequestError(411, "send the parameters in the query string; chunked bodies are refused")
        asked = self._parse(asgi.query(scope))
        body = await asgi.read_body(receive, self.max_body_bytes)
        live = await self._make(asked, scope, body)
        headers, payload = rules.created(live.stream_id, asgi.root_path(scope))
        await asgi.answer(send, 201, headers, payload)

    def _parse(self, query: str) -> _Asked:
        if self.model is None:
            spec, cut = spec_from_query(query)
            return _Asked(spec, {}, cut)
        rest, live = split_query(query)
        if "last_event_id" in live:
            raise RequestError(400, "last_event_id applies to /streams/<id>/events, not to a new stream")
        cut = parse_count("cut_after", live["cut_after"]) if "cut_after" in live else None
        if cut is not None and not 0 <= cut < MAX_MODEL_TOKENS:
            raise RequestError(400, cut_range_message(MAX_MODEL_TOKENS, live["cut_after"]))
        params: dict[str, str] = {}
        for name, value in parse_qsl(rest, keep_blank_values=True):
            if name in params:
                raise RequestError(400, f"parameter {name!r} given more than once; give it once")
            params[name] = value
        return _Asked(None, params, cut)

    async def _make(self, asked: _Asked, scope: dict[str, Any], body: bytes) -> LiveStream:
        """Admit the creation (429 past the client's quota) and make the stream."""
        try:
            self.registry.admit_creation(asgi.client(scope))
        except OverQuota as exc:
            raise rules.quota_error(exc) from None
        if asked.spec is not None:
            return await self.registry.create_async(asked.spec, cut_after=asked.cut)
        stream_id = secrets.token_urlsafe(STREAM_ID_BYTES)
        request = StreamRequest(stream_id, asked.params, body, asgi.client(scope))
        assert self.model is not None
        try:
            source = await open_source(self.model, request)
        except ValueError as exc:
            raise RequestError(400, str(exc)) from None
        except Exception as exc:
            logger.error("tokenwire: the model factory raised %s", type(exc).__name__, exc_info=exc)
            raise RequestError(500, f"the model factory raised {type(exc).__name__}") from None
        spec = RunSpec(policy=self.policy, capacity=self.buffer, on_disconnect=self.on_disconnect)
        stream = ModelStream(stream_id, source, self.registry.log, policy=self.policy, capacity=self.buffer,
                             on_disconnect=self.on_disconnect, meta={"model": "asgi"})
        self._models.add(stream)
        assert isinstance(self.registry, _Registry)
        return self.registry.add(stream, spec, asked.cut)

    async def _events(self, scope: dict[str, Any], receive: Receive, send: Send, live: LiveStream, *,
                      created: bool) -> None:
        asked = rules.events_request(asgi.query(scope), asgi.header_values(scope, b"last-event-id"), live.stream,
                                     await self.registry.length_async(live.stream_id), created=created)
        await self.registry.check_cursor_async(live.stream_id, asked.cursor)
        if asked.complete:
            await asgi.answer(send, 204, rules.NO_CONTENT_HEADERS)
            return
        try:
            self.registry.open_slot()
        except Busy as exc:
            raise rules.busy_error(exc) from None
        try:
            await self._write(live, asked.cursor, live.take_cut(asked.cut), receive, send)
        finally:
            self.registry.close_slot()

    async def _write(self, live: LiveStream, cursor: int, cut: int | None, receive: Receive, send: Send) -> None:
        driver, stream = self._driver(), live.stream
        channel: BoundedChannel[TokenItem] = stream.new_channel()
        writer = stream.serve(cursor, channel, cut_after=cut)          # the wire sends the heartbeat
        wire = AsgiWire(send, driver.loop, write_timeout_s=self.config.write_timeout_s,
                        heartbeat_s=self.config.heartbeat_s)

        def start(wire: AsgiWire) -> None:
            done = driver.spawn(writer, wire)
            done.add_done_callback(lambda future: _written(future, wire, stream, channel))

        await wire.respond(_SSE, receive, start, on_gone=lambda: stream.disconnect(channel))


def _written(future: asyncio.Future[Any], wire: AsgiWire, stream: Stream,
             channel: BoundedChannel[TokenItem]) -> None:
    """The writer has ended: the response ends; a writer that failed (the log lost the stream) lets go of it."""
    wire.end()
    if future.cancelled() or future.exception() is not None:
        stream.disconnect(channel)


def _process_error(exc: BaseException) -> None:
    if not isinstance(exc, LogError):
        logger.error("tokenwire: a stream process failed: %s: %s", type(exc).__name__, exc)

