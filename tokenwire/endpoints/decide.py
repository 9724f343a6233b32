"""The live endpoints' decisions: create, open and resume, written once for both adapters.

How this works: ``Endpoints.decide`` takes a ``LiveRequest`` and answers
with an ``Answer`` or an ``OpenStream`` (``decisions``).  The sequence is the
one both servers follow, in this order, so the same request gets the same
refusal from either: the path and method from the route table (``routes``:
404, 405, 501); who asks, when the app has an ``authorize`` hook (``access``:
401, 403); for a route that takes a body, a chunked one (411) and a
declared length past the route's limit (413, 400 if malformed); then the
route's handler (its ``kind``): the query (400), the body (413, read only
now, by the adapter's ``read_body``); for ``GET /stream`` the open-stream slots (503, before
anything is made); the client's creation quota (429), then the stream is
made.  An events request finds the stream (404, also for one another
principal made: ``stream_of``), reads its cursor (400),
checks the log still holds what follows it (410), says 204 to a reader that
has every token of a stream that ended normally, and takes a slot (503).  A
``RequestError`` or a token-log failure anywhere is the refusal it names
(``rules``).

What a new stream is differs: the canned answer (``CannedMaker``, the
report's parameters) or a user's model (``tokenwire.asgi``); a
``StreamMaker`` parses a create query and makes the stream.  Writing an
open stream is ``Endpoints.write`` (``writing``), against the adapter's wire.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from urllib.parse import parse_qsl

from ..core.tokenlog import LogError
from . import rules
from .access import DEFAULT_CHALLENGE, Access, Authorize, ask, check_owner, header_map, owner_meta
from .chat import canned_query, open_chat, resume_chat, stop_chat
from .config import JOURNAL_SIZE, ConnectionLog, LiveConfig
from .decisions import (
    CHAT_COMPLETIONS,
    Answer,
    Asked,
    ChatRequest,
    LiveRequest,
    OpenAIRequest,
    OpenStream,
    StreamMaker,
    promised_leave,
)
from .exposition import Exposition, exposition
from .kept import Kept
from .metering import Meter
from .openai import (
    cancel_response,
    chat_completions,
    create_response,
    models_answer,
    one_choice,
    retrieve_response,
)
from .params import RequestError, echo, spec_from_query
from .registry import LiveStream, OverQuota, Registry
from .routes import LIVE_ROUTES, ErrorFormat, Found, RouteTable
from .writing import EventWire, Writing, write_events

__all__ = ["CannedMaker", "Endpoints", "ReadBody", "StreamMaker", "logger", "refusal"]

# The one logger: ``tokenwire serve`` (and ``--quiet``) configures it; an
# ASGI server's logging configuration reaches it as any library's.
logger = logging.getLogger("tokenwire")

# Reads the request's body, refusing it past the given limit (a ``RequestError`` 413).
ReadBody = Callable[[int], Awaitable[bytes]]


class CannedMaker:
    """The canned 277-token answer, shaped by the report's parameters."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry

    def parse(self, query: str) -> Asked:
        spec, cut = spec_from_query(query)
        return Asked(spec, {}, cut)

    def parse_chat(self, chat: ChatRequest) -> Asked:
        spec, cut = spec_from_query(canned_query(chat.body))
        return _kept_promise(Asked(spec, {}, cut, chat))

    def parse_openai(self, request: OpenAIRequest) -> Asked:
        if request.api == CHAT_COMPLETIONS and not one_choice(request.body):
            raise RequestError(400, f"n must be 1: the canned answer is one answer, one choice, got "
                                    f"{echo(json.dumps(request.body['n']))}")
        spec, cut = spec_from_query(canned_query(request.body))
        return _kept_promise(Asked(spec, {}, cut, openai=request))

    async def model_ids(self) -> list[str]:
        return [CANNED_MODEL]

    async def make(self, asked: Asked, request: LiveRequest, body: bytes) -> LiveStream:
        assert asked.spec is not None
        return await self.registry.create_async(asked.spec, cut_after=asked.cut, meta=owner_meta(request.principal))


def _kept_promise(asked: Asked) -> Asked:
    """``asked`` with the canned answer's ``on_disconnect`` set to the route's promise (``promised_leave``)."""
    promised = promised_leave(asked)
    if promised is None or asked.spec is None:
        return asked
    return dataclasses.replace(asked, spec=dataclasses.replace(asked.spec, on_disconnect=promised))


# What ``GET /v1/models`` lists for the canned answer (any model a request names is answered, and echoed).
CANNED_MODEL = "tokenwire-canned"

Handler = Callable[[LiveRequest, Found, Callable[[], Awaitable[bytes]]], Awaitable[Answer | OpenStream]]
# What answers a route from the request's body, or from its path's ``<id>`` (``open_chat``, ``resume_chat``,
# ``Endpoints.stop``...): ``Endpoints._of_body`` and ``_of_id`` make a ``Handler`` of one.
AnswersBody = Callable[["Endpoints", LiveRequest, bytes], Awaitable[Answer | OpenStream]]
AnswersId = Callable[["Endpoints", LiveRequest, str], Awaitable[Answer | OpenStream]]


class Endpoints:
    """The live routes of ``routes`` (``POST /streams``, ``GET /streams/<id>/events``, ...) over ``registry``.

    ``maker`` makes new streams (the canned answer by default).  ``alone``:
    these routes are all the server serves, so any other path is their 404
    and an unknown method their 501; otherwise ``decide`` answers None for a
    path that is not theirs.  ``body_limits`` sets the routes' body limits
    by setting name (``{"max_body_bytes": 2048}``; ``RouteTable.with_limits``).
    ``authorize``: the hook asked who makes each request (``access``; None:
    nobody is asked, whoever holds an id reads it); ``challenge`` is what a
    401 names in ``WWW-Authenticate``; ``secret``: the headers, besides
    ``SECRET_HEADERS``, that the ``Access`` it is shown hides (the app's
    ``keep_out_of_log``).  ``journal`` keeps the last finished connections (``ConnectionLog``) for
    tests and the demo.  ``meter``: what ``GET /metrics`` reports (None: it
    answers 404; ``metering``, ``exposition``).
    """

    def __init__(self, registry: Registry, config: LiveConfig, maker: StreamMaker | None = None, *,
                 alone: bool = False, routes: RouteTable = LIVE_ROUTES,
                 body_limits: Mapping[str, int] | None = None, authorize: Authorize | None = None,
                 challenge: str = DEFAULT_CHALLENGE, meter: Meter | None = None, secret: Iterable[str] = ()) -> None:
        self.registry, self.config, self.alone, self.meter = registry, config, alone, meter
        self.authorize, self.challenge, self.secret = authorize, challenge, tuple(secret)
        self._exposition: Exposition | None = None
        self.routes = routes.with_limits(body_limits or {})
        self.maker: StreamMaker = maker if maker is not None else CannedMaker(registry)
        self.journal: deque[ConnectionLog] = deque(maxlen=JOURNAL_SIZE)
        self.writing: set[Writing] = set()      # the streams being written now
        self.closing = False                    # a shutdown has closed the streams (close_streams)
        self.chats = Kept(registry, "chat")          # each chat's latest stream's id
        self.continued = Kept(registry, "continued")  # the assistant message a chat's stream goes on with
        self.records = Kept(registry, "response")    # each OpenAI response's record (JSON)
        # What answers each route's ``kind`` (``Route.kind``).
        self.handlers: dict[str, Handler] = {
            "create": self._create, "events": self._events, "create_and_open": self._create_and_open,
            "metrics": self._metrics, "models": self._models,
            "stop": self._of_id(type(self).stop), "chat_stop": self._of_id(stop_chat),
            "chat": self._of_body(open_chat), "chat_stream": self._of_id(resume_chat),
            "chat_completions": self._of_body(chat_completions), "responses": self._of_body(create_response),
            "response": self._of_id(retrieve_response), "response_cancel": self._of_id(cancel_response)}
        unknown = sorted({route.kind for route in self.routes.routes} - set(self.handlers))
        if unknown:
            raise ValueError(f"no handler answers a route of kind {unknown[0]!r}; the kinds are "
                             f"{sorted(self.handlers)}")

    def serves(self, path: str) -> bool:
        """Whether these routes answer ``path`` (as sent); the others are the server's own."""
        return self.routes.claims(path)

    async def decide(self, request: LiveRequest, read_body: ReadBody) -> Answer | OpenStream | None:
        """The answer to ``request``: a whole ``Answer``, an ``OpenStream`` to write, or None (not a live path).

        ``read_body(limit)`` reads the request's body, refusing it past ``limit`` bytes (413).
        """
        if self.meter is None:
            return await self._decide(request, read_body)
        arrived = time.perf_counter_ns()           # the request's start, for TTFT (``metering``)
        decision = await self._decide(request, read_body)
        if isinstance(decision, OpenStream):
            return dataclasses.replace(decision, arrived_ns=arrived)
        if decision is not None and decision.status >= 400:
            self.meter.refused[decision.status] += 1
        return decision

    async def _decide(self, request: LiveRequest, read_body: ReadBody) -> Answer | OpenStream | None:
        try:
            found = self.routes.find(request.path, request.method, alone=self.alone)
        except RequestError as exc:
            return refusal(exc, self.routes.errors_of(request.path))     # a 405 in its route's format
        if found is None:
            return None
        route = found.route
        try:
            if self.authorize is not None:        # who asks, before a body is read or a stream looked up
                access = Access(route.action, header_map(request.headers, self.secret), found.params.get("id"))
                request = dataclasses.replace(request, principal=await ask(self.authorize, access, self.challenge))
            coding, lengths = request.header_values("transfer-encoding"), request.header_values("content-length")
            if route.takes_body:
                route.check_body(coding, lengths)
            else:
                rules.check_transfer_encoding(coding, lengths)     # the framing rule holds on every route
            route.check_query(request.query)                        # and the query's, before a body is read
            return await self.handlers[route.kind](request, found, lambda: read_body(route.body_limit))
        except RequestError as exc:
            return refusal(exc, route.errors)
        except LogError as exc:
            return refusal(rules.log_error(exc), route.errors)

    async def _create(self, request: LiveRequest, found: Found, read_body: Callable[[], Awaitable[bytes]]) -> Answer:
        asked = self.maker.parse(request.query)
        body = await read_body()
        live = await self.make(asked, request, body)
        return Answer(201, *rules.created(live.stream_id, request.root_path))

    async def _events(self, request: LiveRequest, found: Found,
                      read_body: Callable[[], Awaitable[bytes]]) -> OpenStream | Answer:
        live = await self.stream_of(request, found.params["id"])
        return await self._open(request, live, created=False)

    async def stream_of(self, request: LiveRequest, stream_id: str) -> LiveStream:
        """The stream ``request`` reads or stops; raises ``UnknownStream`` (404) for one it may not touch.

        With an ``authorize`` hook, a stream made by another principal is
        refused exactly as an id never made (``access.check_owner``), on any
        process: the principal is read from the stream's meta in the log.
        """
        if self.authorize is not None:
            aio = self.registry.aio          # the meta in one call on Redis
            meta = await aio.meta(stream_id) if aio is not None else self.registry.log.meta(stream_id)
            check_owner(meta, request.principal, stream_id)
        return await self.registry.get_async(stream_id)

    async def stop(self, request: LiveRequest, stream_id: str) -> Answer:
        """Stop ``stream_id`` for good, wherever it runs: 200 with its state now; 404 for one it may not touch."""
        await self.stream_of(request, stream_id)       # 404 for one it may not stop, as for reading
        state = await self.registry.stop_async(stream_id)
        return Answer(200, *rules.stopped(stream_id, state))

    async def _create_and_open(self, request: LiveRequest, found: Found,
                               read_body: Callable[[], Awaitable[bytes]]) -> OpenStream | Answer:
        asked = self.maker.parse(request.query)
        rules.last_event_id(request.header_values("last-event-id"), created=True)  # refused before a stream is made
        rules.check_room(self.registry)                       # nor is one made for a 503
        live = await self.make(asked, request, b"")
        return await self._open(request, live, created=True)

    async def _metrics(self, request: LiveRequest, found: Found,
                       read_body: Callable[[], Awaitable[bytes]]) -> Answer:
        if self._exposition is None:
            self._exposition = exposition(self.meter, self.registry, lambda: len(self.writing))
        names = [value for name, value in parse_qsl(request.query, keep_blank_values=True) if name == "name[]"]
        return self._exposition.answer(names or None)

    async def scrape(self, request: LiveRequest) -> Answer:
        """``request`` answered as ``/metrics`` wherever it was sent (``TokenStreams.metrics_app``): the scrape,
        the ``authorize`` hook's refusal, or 405 for a method other than GET."""
        decision = await self.decide(dataclasses.replace(request, path="/metrics"), _no_body)
        if not isinstance(decision, Answer):        # a route table without /metrics
            return refusal(RequestError(404, "these routes have no GET /metrics"))
        return decision

    def _of_body(self, answer: AnswersBody) -> Handler:
        """The handler that gives ``answer`` the request's body, read within its route's limit."""
        async def handle(request: LiveRequest, found: Found,
                         read_body: Callable[[], Awaitable[bytes]]) -> Answer | OpenStream:
            return await answer(self, request, await read_body())
        return handle

    def _of_id(self, answer: AnswersId) -> Handler:
        """The handler that gives ``answer`` the ``<id>`` of the request's path."""
        async def handle(request: LiveRequest, found: Found,
                         read_body: Callable[[], Awaitable[bytes]]) -> Answer | OpenStream:
            return await answer(self, request, found.params["id"])
        return handle

    async def _models(self, request: LiveRequest, found: Found, read_body: Callable[[], Awaitable[bytes]]) -> Answer:
        return models_answer(await self.maker.model_ids())

    async def make(self, asked: Asked, request: LiveRequest, body: bytes) -> LiveStream:
        """Make the stream ``asked`` describes, within ``request``'s client's creation quota (429 past it)."""
        try:
            self.registry.admit_creation(request.client)
        except OverQuota as exc:
            raise rules.quota_error(exc) from None
        live = await self.maker.make(asked, request, body)
        if self.meter is not None:
            self.meter.created += 1
        return live

    async def _open(self, request: LiveRequest, live: LiveStream, *, created: bool) -> OpenStream | Answer:
        registry, stream_id = self.registry, live.stream_id
        generated, state = await registry.progress_async(stream_id)
        if not created:                       # a cursor past a shared log's end: lost, never spliced (410)
            generated = await rules.behind_the_log(registry, live.stream, request.query,
                                                   request.header_values("last-event-id"), generated, state)
        asked = rules.events_request(request.query, request.header_values("last-event-id"), live.stream,
                                     generated, state, created=created)
        await registry.check_cursor_async(stream_id, asked.cursor)     # a 410 now, while a status can say so
        if asked.complete:
            return Answer(204, rules.NO_CONTENT_HEADERS)
        rules.take_slot(registry)
        return OpenStream(live, asked.cursor, asked.cut, asked.header, asked.query_id, resumed=asked.cursor >= 0)

    # -- writing ---------------------------------------------------------------------
    def write(self, decision: OpenStream, wire: EventWire) -> Writing:
        """Start writing ``decision``'s stream to ``wire``; its slot goes back when the writer ends."""
        if self.meter is not None:
            decision = dataclasses.replace(decision, rendering=self.meter.rendering(
                decision.rendering, decision.arrived_ns, decision.cursor, decision.resumed))
        try:
            writing = write_events(decision, wire, self.registry, self.config, self.journal.append,
                                   self.writing.discard)
        except BaseException:
            self.release(decision)             # the writer never started: its slot goes back
            raise
        self.writing.add(writing)
        if self.closing:
            writing.close()                    # opened after the shutdown closed the others: it ends too
        return writing

    def release(self, decision: OpenStream) -> None:
        """Give back ``decision``'s slot without writing it (the client left first)."""
        del decision
        self.registry.close_slot()

    def close_streams(self) -> int:
        """End every stream being written after the frame it is writing (a shutdown); returns how many."""
        self.closing = True
        writing = list(self.writing)
        for one in writing:
            one.close()
        return len(writing)


async def _no_body(limit: int) -> bytes:
    return b""


def refusal(exc: RequestError, errors: ErrorFormat = "tokenwire") -> Answer:
    """A live endpoint's refusal as an answer: JSON in the route's format ``errors``, with the error's own headers."""
    return Answer(exc.status, (*rules.JSON_HEADERS, *exc.headers), rules.error_body(exc.message, exc.status, errors))


def process_error(exc: BaseException) -> None:
    """A stream process failed: one line on the logger (a token-log failure is expected, and said elsewhere)."""
    if not isinstance(exc, LogError):
        logger.error("a stream process failed: %s: %s", type(exc).__name__, exc)
