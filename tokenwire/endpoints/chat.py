"""The AI SDK's chat routes: ``POST /chat`` and ``GET /chat/<id>/stream``, decided once for both servers.

How this works: ``parse_chat`` reads the JSON body the SDK's transports
send (``DefaultChatTransport``: ``{id, messages, trigger, messageId, ...}``;
``WorkflowChatTransport``: ``{messages, ...}``) into a ``ChatRequest``.  A
``POST /chat`` makes a stream as ``POST /streams`` does (the same quota, the
same stream maker: the canned answer takes the report's parameters from the body's
fields, a model gets the ``ChatRequest``), remembers it as the chat's stream
(``Endpoints.chats``, a ``Kept``: in memory, or in the shared log so any
instance resumes any chat; a new POST for the chat replaces it) and opens
it at once, rendered as a UI message stream (``ui_stream``) with the stream id
in ``x-workflow-run-id``.

``GET /chat/<id>/stream`` names a chat or a stream.  Without ``startIndex``
(``DefaultChatTransport.reconnectToStream``) it is 204 unless the chat's
stream is still generating, and otherwise replays it from ``start`` and goes
on live.  With ``startIndex=N`` (``WorkflowChatTransport``), or a
``Last-Event-ID`` (the last chunk read: it wins over ``startIndex``, so an
EventSource's reconnect never gets chunks again), it sends chunks N onward, also after
the end; a negative N counts back from the last chunk so far, whose number
the answer's ``x-workflow-stream-tail-index`` says.  Anyone who holds a chat
id or a stream id may read it, as with ``/streams``; with an ``authorize``
hook, only the principal that made the stream (``Endpoints.stream_of``),
and a chat id names a chat of the asking principal's own (``chat_name``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Protocol
from urllib.parse import parse_qsl, urlencode

from ..core.stream import Stream
from ..core.tokenlog import StreamState, UnknownStream
from ..report.params import NAMES
from . import rules
from .access import chat_name
from .bodies import MAX_ID_CHARS, field_of, json_object, text_field
from .decisions import Answer, Asked, ChatRequest, Headers, LiveRequest, OpenStream, StreamMaker
from .kept import Kept
from .params import MAX_ID_DIGITS, PastTheEnd, RequestError, echo, parse_count
from .registry import LiveStream, Registry
from .routes import ID_SEGMENT
from .ui_messages import chat_messages, continued_message
from .ui_stream import UI_STREAM_HEADERS, ChatFrames, chunk_count

__all__ = ["CHAT_FIELDS", "canned_query", "open_chat", "stream_named",
           "parse_chat", "resume_chat", "stop_chat"]

# A chat id: what the SDK's ids are made of (generateId: 16 alphanumerics; UUIDs), as a path segment takes it.
_CHAT_ID = re.compile(ID_SEGMENT)
# The body fields the SDK's transports send about the chat itself (the rest is the app's own).
CHAT_FIELDS = ("id", "messages", "trigger", "messageId")
# The body fields the canned answer reads: the report's parameters and the live cut.
_CANNED_FIELDS = frozenset((*NAMES, "cut_after", "parts"))
_RUN_ID, _TAIL = "x-workflow-run-id", "x-workflow-stream-tail-index"


class Endpoints(Protocol):
    """What the chat routes use of the endpoints (``decide.Endpoints``): the registry, the stream maker, the chats,
    making and stopping streams."""

    registry: Registry
    maker: StreamMaker
    chats: Kept
    continued: Kept

    async def stream_of(self, request: LiveRequest, stream_id: str) -> LiveStream: ...
    async def make(self, asked: Asked, request: LiveRequest, body: bytes) -> LiveStream: ...
    async def stop(self, request: LiveRequest, stream_id: str) -> Answer: ...


def parse_chat(body: bytes) -> ChatRequest:
    """Read a chat body; raises ``RequestError`` 400 naming what is wrong."""
    data = json_object(body, "a chat body")
    messages = field_of(data, "a chat body", "messages", list, "a list")
    chat_id, trigger, message_id = (text_field(data, "a chat body", name, MAX_ID_CHARS)
                                    for name in ("id", "trigger", "messageId"))
    if chat_id is not None and not _CHAT_ID.fullmatch(chat_id):
        raise RequestError(400, f"a chat id is 1 to 64 letters, digits, '-' or '_', got {echo(chat_id)}")
    return ChatRequest(chat_id, tuple(messages), trigger, message_id, data, tuple(chat_messages(messages)),
                       continued_message(messages))


def canned_query(body: Mapping[str, Any]) -> str:
    """The canned answer's create query: the report's parameters (and ``cut_after``) among a JSON body's fields."""
    pairs = []
    for name, value in body.items():
        if name not in _CANNED_FIELDS:
            continue
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise RequestError(400, f"{name} must be a number or a string, got {echo(json.dumps(value))}")
        pairs.append((name, str(value)))
    return urlencode(pairs)


def _headers(stream_id: str, *extra: tuple[str, str]) -> Headers:
    return (*UI_STREAM_HEADERS, (_RUN_ID, stream_id), *extra)


async def open_chat(endpoints: Endpoints, request: LiveRequest, body: bytes) -> OpenStream:
    """``POST /chat``: make the chat's stream, remember it as the chat's, open it from chunk 0."""
    chat = parse_chat(body)
    asked = endpoints.maker.parse_chat(chat)
    registry = endpoints.registry
    rules.check_room(registry)                            # no stream is made for a 503
    live = await endpoints.make(asked, request, body)
    if chat.chat_id is not None:
        await endpoints.chats.put(chat_name(request.principal, chat.chat_id), live.stream_id)
    if chat.continues is not None:                        # a replay from chunk 0 names the same message
        await endpoints.continued.put(live.stream_id, chat.continues)
    return _opened(endpoints, live, -1, ChatFrames(0, chat.continues), _headers(live.stream_id))


def _opened(endpoints: Endpoints, live: LiveStream, cursor: int, frames: ChatFrames, headers: Headers,
            resumed: bool = False) -> OpenStream:
    rules.take_slot(endpoints.registry)
    return OpenStream(live, cursor, None, None, None, frames, headers, resumed=resumed)


async def stream_named(endpoints: Endpoints, request: LiveRequest, name: str) -> str:
    """The stream a chat path's ``name`` means: the asking principal's chat's latest, else the stream ``name``."""
    return await endpoints.chats.get(chat_name(request.principal, name)) or name


async def stop_chat(endpoints: Endpoints, request: LiveRequest, name: str) -> Answer:
    """``POST /chat/<name>/stop``: stop the stream ``name`` means (``stream_named``), as ``Endpoints.stop`` does."""
    return await endpoints.stop(request, await stream_named(endpoints, request, name))


async def resume_chat(endpoints: Endpoints, request: LiveRequest, name: str) -> OpenStream | Answer:
    """``GET /chat/<name>/stream``: a chat's or a stream's chunks (see the module)."""
    start, asked = _start(request)
    resumed = start is not None and start > 0             # it has chunks 0..start-1 (a tail, -N, has none)
    registry = endpoints.registry
    stream_id = await stream_named(endpoints, request, name)
    try:
        live = await endpoints.stream_of(request, stream_id)
    except UnknownStream:
        if start is None:
            return Answer(204, rules.NO_CONTENT_HEADERS)      # a chat that never started, or was forgotten
        raise
    generated, state = await registry.progress_async(stream_id)
    ended = state is not StreamState.GENERATING
    if start is None:
        if ended:
            return Answer(204, rules.NO_CONTENT_HEADERS)      # nothing generating: DefaultChatTransport's 204
        start = 0
    while True:
        try:
            frames, cursor, extra = await _placed(registry, stream_id, start,
                                                  (generated, ended, _failed(live.stream)), asked)
            break
        except PastTheEnd:                                  # a shared log went back: lost, or it grew meanwhile
            if registry.aio is None:
                raise
            await rules.lost_if_behind(registry, stream_id, generated)
            generated, state = await registry.progress_async(stream_id)
            ended = state is not StreamState.GENERATING
    await registry.check_cursor_async(stream_id, cursor)     # a 410 now, while a status can say so
    if frames.start == 0:                                   # it sends `start`: with the message it goes on with
        frames.message_id = await endpoints.continued.get(stream_id)
    return _opened(endpoints, live, cursor, frames, _headers(stream_id, *extra), resumed)


async def _placed(registry: Registry, stream_id: str, start: int, progress: tuple[int, bool, bool],
                  asked: str) -> tuple[ChatFrames, int, Headers]:
    """The rendering of a reader starting at chunk ``start`` (negative: back from the last so far), the writer's
    cursor and the tail header; the chunk numbers are ``ui_stream``'s, read off the log's prefix."""
    generated, ended, failed = progress
    extra: Headers = ()
    if start < 0:                                          # a tail: count every chunk there is first
        entries = await _logged(registry, stream_id, -1, generated)
        count = chunk_count(entries, ended, failed)
        start, extra = max(0, count + start), ((_TAIL, str(count - 1)),)
        frames = ChatFrames(start)
        return frames, frames.skip(entries, 0) - 1, extra
    frames = ChatFrames(start)
    fed = await _skipped(registry, stream_id, frames, generated)
    if fed == generated:
        count = frames.count(fed, ended, failed)
        if start > count:
            message = f"{asked} is past the end: this stream has chunks 0..{count - 1} so far"
            raise RequestError(400, message) if ended else PastTheEnd(message)
    return frames, fed - 1, extra


async def _skipped(registry: Registry, stream_id: str, frames: ChatFrames, generated: int) -> int:
    """Feed ``frames`` the logged entries its reader has every chunk of (of the ``generated`` first), read in
    batches as long as ``frames.wanted`` says; the index of the first it did not take."""
    fed = 0
    while fed < generated:
        batch = await _logged(registry, stream_id, fed - 1, min(generated - fed, frames.wanted(fed)))
        taken = frames.skip(batch, fed)
        if taken < fed + len(batch) or not batch:
            return taken
        fed = taken
    return fed


async def _logged(registry: Registry, stream_id: str, cursor: int, count: int) -> list[str]:
    """``count`` logged entries after ``cursor`` (a prefix trimmed away: ``LogGap``, a 410)."""
    if count <= 0:
        return []
    if registry.aio is not None:
        return await registry.aio.read_after(stream_id, cursor, count)
    return registry.log.read_after(stream_id, cursor, count)


def _failed(stream: Stream) -> bool:
    return stream.ending is not None and stream.ending.error is not None


def _start_index(value: str) -> int:
    """``?startIndex=``'s value: a chunk number, or ``-N`` counting back from the last (N at least 1)."""
    if not value.startswith("-"):
        return parse_count("startIndex", value)
    try:
        back = parse_count("startIndex", value[1:])
    except RequestError:
        back = 0
    if back == 0:               # '-0', '--1', '-x' were read as 0, or quoted without their '-'
        raise RequestError(400, f"a negative startIndex is '-' and a count from 1 (at most {MAX_ID_DIGITS} digits, "
                                f"no leading zeros), got {echo(value)}")
    return -back


def _start(request: LiveRequest) -> tuple[int | None, str]:
    """The chunk a resume asks to start at: ``Last-Event-ID`` + 1, else ``?startIndex=`` (may be negative), and
    how a refusal names what was asked (``startIndex 12``, ``Last-Event-ID 999``: the one the client sent).

    The header wins, as on ``/streams/<id>/events``: an EventSource (or ``tokenwire.client``) reconnecting to
    a ``?startIndex=0`` URL sends the last chunk it has, and must not get chunk 0 again.
    """
    pairs = parse_qsl(request.query, keep_blank_values=True)
    other = sorted({name for name, _ in pairs} - {"startIndex"})
    if other:
        raise RequestError(400, f"a chat stream URL takes only startIndex, got {echo(other[0])}")
    given = [value for _, value in pairs]        # once at most: the route refuses a parameter given twice
    start = None if not given else _start_index(given[0])
    last = rules.last_event_id(request.header_values("last-event-id"), created=False)
    if last is None or last == "":
        return start, f"startIndex {start}"
    if len(last) > MAX_ID_DIGITS:
        raise RequestError(400, f"Last-Event-ID must be a chunk number, got {echo(last)}")
    return parse_count("Last-Event-ID", last) + 1, f"Last-Event-ID {last}"
