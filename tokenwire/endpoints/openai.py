"""OpenAI's routes: ``/v1/chat/completions``, ``/v1/responses`` (and its retrieve and cancel), ``/v1/models``.

How this works: ``parse_openai`` reads the JSON body the ``openai`` SDK
sends into an ``OpenAIRequest``; the stream maker reads it (the canned answer takes
the report's parameters from the body's fields, a model gets the request as
``StreamRequest.openai``) and a stream is made as ``POST /streams`` makes
one (the same quota, the same log).  What goes on the wire is a rendering of
that stream: chat chunks (``openai_chat``), or Responses events numbered by
``sequence_number`` (``openai_responses``, which also says where a reader
resumes after ``starting_after``).

An answer that is not streamed (no ``stream``) is gathered by a reader
inside the server, a connection like any other whose rendering keeps the
text (``Gathered``), and sent whole.  A background response without a
stream is gathered the same way without waiting for it, so it runs to the
end with nobody connected; a response's stream is made to go on when its
reader leaves (``detach``), so ``GET /v1/responses/{id}?stream=true&
starting_after=N`` gets the events after N, live while it generates and
whole after it ends, from any instance on a shared log.  A response's id is
``resp_`` and its stream's id; its model, creation time and background flag
are kept beside it, as JSON (``Endpoints.records``, a ``Kept``: in memory, or in the shared log).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Protocol
from urllib.parse import parse_qsl

from ..core.endings import EarlyEnd
from ..core.retry import Backoff, Said
from ..core.tokenlog import StreamState, UnknownStream
from . import rules
from .bodies import MAX_MODEL_CHARS, field_of, json_object, text_field
from .decisions import CHAT_COMPLETIONS, RESPONSES, Answer, Asked, LiveRequest, OpenAIRequest, OpenStream, StreamMaker
from .kept import Kept
from .openai_chat import ChatChunks, chat_completion
from .openai_response import response_object, response_status
from .openai_responses import ResponseEvents, resume, whole_response
from .openai_wire import Answered, Gathered
from .params import PastTheEnd, RequestError, echo, parse_count
from .registry import LiveStream, Registry
from .writing import Writing

__all__ = ["CHAT_COMPLETIONS", "RESPONSES", "cancel_response", "chat_completions", "create_response",
           "models_answer", "one_choice", "parse_openai", "retrieve_response"]

_RESPONSE_PREFIX = "resp_"
# What a retrieve's query may carry: the SDK sends include (and include_obfuscation), which change nothing here.
_RETRIEVE_PARAMS = ("stream", "starting_after", "include", "include[]", "include_obfuscation")


class Endpoints(Protocol):
    """What the OpenAI routes use of the endpoints (``decide.Endpoints``)."""

    registry: Registry
    maker: StreamMaker
    records: Kept
    closing: bool

    async def make(self, asked: Asked, request: LiveRequest, body: bytes) -> LiveStream: ...
    def write(self, decision: OpenStream, wire: Any) -> Writing: ...
    async def stream_of(self, request: LiveRequest, stream_id: str) -> LiveStream: ...


def one_choice(body: Mapping[str, Any]) -> bool:
    """Whether a chat completion's body asks for one choice (``n`` absent, null or 1): a stream is one answer, and
    every route that serves it refuses more by name, each in its own words."""
    n = body.get("n")
    return n is None or (n == 1 and type(n) is int)


def _flag(data: Mapping[str, Any], name: str) -> bool:
    value = data.get(name)
    if value is None or isinstance(value, bool):
        return bool(value)
    raise RequestError(400, f"{name!r} must be true or false, got {echo(json.dumps(value))}")


def parse_openai(body: bytes, api: str) -> OpenAIRequest:
    """Read a chat completion's or a response's JSON body; raises ``RequestError`` 400 naming what is wrong."""
    data = json_object(body, "the body")
    model = field_of(data, "the body", "model", str, "a string")
    text_field(data, "the body", "model", MAX_MODEL_CHARS)
    for name in ("previous_response_id", "user"):
        text_field(data, "the body", name)
    messages: tuple[Any, ...] = ()
    if api == CHAT_COMPLETIONS:
        messages = tuple(field_of(data, "the body", "messages", list, "a list"))
        options = data.get("stream_options")
        if options is not None and not isinstance(options, dict):
            raise RequestError(400, f"'stream_options' must be an object, got {echo(json.dumps(options))}")
        _flag(options or {}, "include_usage")
    else:
        field_of(data, "the body", "input", (str, list), "a string or a list")
    background = _flag(data, "background") if api == RESPONSES else False
    return OpenAIRequest(api, model, messages, data.get("input"), _flag(data, "stream"), background, data)


def _include_usage(request: OpenAIRequest) -> bool:
    return bool((request.body.get("stream_options") or {}).get("include_usage"))


async def _made(endpoints: Endpoints, request: LiveRequest, body: bytes, api: str) -> tuple[OpenAIRequest, LiveStream]:
    parsed = parse_openai(body, api)
    asked = endpoints.maker.parse_openai(parsed)
    registry = endpoints.registry
    rules.check_room(registry)                            # no stream is made for a 503
    return parsed, await endpoints.make(asked, request, body)


class _Inside:
    """The ``EventWire`` of a reader inside the server: it takes every frame and says when the connection ended."""

    def __init__(self) -> None:
        self.failure: str | None = None
        self.bytes_sent = 0
        self.ended = asyncio.get_running_loop().create_future()

    def send(self, frame: bytes, resume: Callable[[bool], None]) -> bool:
        return True

    def snapshot(self) -> tuple[int, int]:
        return 0, 0

    def end(self) -> None:
        if not self.ended.done():
            self.ended.set_result(None)


async def _gather(endpoints: Endpoints, live: LiveStream, gathered: Gathered) -> Gathered:
    """Read ``live`` to its end inside the server (again from where it stopped, if a connection was closed).

    A connection that brought nothing (the log failed under it) is tried again after a backoff, said on the
    log at most every 10 s per cause: a log that keeps failing is not asked in a loop.
    """
    backoff = Backoff()
    while not gathered.ended:
        if endpoints.closing:
            raise RequestError(503, "the server is shutting down; retrieve the answer from another instance")
        rules.take_slot(endpoints.registry)
        wire = _Inside()
        had = len(gathered.tokens)
        writing = endpoints.write(OpenStream(live, had - 1, None, None, None, gathered), wire)
        await wire.ended
        if gathered.ended or len(gathered.tokens) > had:
            backoff.succeeded()
            continue
        wait_s = backoff.failed()
        failure = writing.error or live.stream.failure
        cause = "its connection ended early" if failure is None else str(failure)
        if _SAID.due(cause, time.monotonic()):
            _logger.warning("stream %s, read to its end inside the server (a background or whole answer): %s; "
                            "trying again in %.2g s, then up to every %g s", live.stream_id, cause, wait_s,
                            backoff.max_s)
        await asyncio.sleep(wait_s)
    return gathered


_logger = logging.getLogger("tokenwire")
# Why the answers read inside the server could not be read, said once per cause every SAY_EVERY_S.
_SAID = Said()


# The readers of background responses being read inside the server: held here, as the loop holds tasks weakly.
_BACKGROUND: set[asyncio.Task[Gathered]] = set()


def _in_background(gathering: Coroutine[Any, Any, Gathered]) -> None:
    """Run ``gathering`` to its end with nobody waiting for it; a shutdown or a lost log just ends it."""
    task = asyncio.ensure_future(gathering)
    _BACKGROUND.add(task)

    def ended(task: asyncio.Task[Gathered]) -> None:
        _BACKGROUND.discard(task)
        if not task.cancelled():
            task.exception()              # retrieved: a RequestError (shutting down) or a LogError is expected

    task.add_done_callback(ended)


def _json_answer(body: Mapping[str, Any], status: int = 200) -> Answer:
    return Answer(status, rules.JSON_HEADERS, json.dumps(body).encode())


def _answered(prefix: str, live: LiveStream, model: str) -> Answered:
    return Answered(prefix + live.stream_id, model, int(time.time()))


async def chat_completions(endpoints: Endpoints, request: LiveRequest, body: bytes) -> OpenStream | Answer:
    """``POST /v1/chat/completions``: the chunks of a new stream, or its whole ``chat.completion``."""
    parsed, live = await _made(endpoints, request, body, CHAT_COMPLETIONS)
    answered = _answered("chatcmpl-", live, parsed.model)
    if parsed.stream:
        rules.take_slot(endpoints.registry)
        return OpenStream(live, -1, None, None, None, ChatChunks(answered, _include_usage(parsed)))
    gathered = await _gather(endpoints, live, Gathered())
    ending = gathered.ending
    if ending is not None and ending.error is not None:
        raise RequestError(500, f"the model failed: {ending.error}")
    return _json_answer(chat_completion(answered, gathered.tokens, ending))


async def create_response(endpoints: Endpoints, request: LiveRequest, body: bytes) -> OpenStream | Answer:
    """``POST /v1/responses``: its events (``stream``), its record at once (``background``), or it whole."""
    parsed, live = await _made(endpoints, request, body, RESPONSES)
    answered = _answered(_RESPONSE_PREFIX, live, parsed.model)
    await endpoints.records.put(answered.id, json.dumps({"model": answered.model, "created": answered.created,
                                                         "background": parsed.background}))
    if parsed.stream:
        rules.take_slot(endpoints.registry)
        return OpenStream(live, -1, None, None, None, ResponseEvents(answered, parsed.background))
    if parsed.background:
        _in_background(_gather(endpoints, live, Gathered()))      # it runs to the end, read by nobody
        return _json_answer(response_object(answered, "queued", background=True))
    gathered = await _gather(endpoints, live, Gathered())
    return _whole(answered, gathered.tokens, response_status(gathered.ending, True), gathered.ending,
                  parsed.background)


def _whole(answered: Answered, tokens: list[str], status: str, ending: EarlyEnd | None,
           background: bool) -> Answer:
    error = ending.error if ending is not None else None
    return _json_answer(whole_response(answered, tokens, status, background, error))


def _status(state: StreamState, ending: EarlyEnd | None) -> str:
    """A response's status as the log says it (``stopped``: cancelled, whatever this instance knows of it)."""
    if state is StreamState.STOPPED or (state is StreamState.CANCELLED and ending is None):
        return "cancelled"
    return response_status(ending, state is not StreamState.GENERATING)


async def _found(endpoints: Endpoints, request: LiveRequest, response_id: str) -> tuple[Answered, bool, LiveStream]:
    """The response ``response_id`` names: who answered, whether in the background, its stream (404: none).

    Its stream is looked up (and its owner checked) before its record: an
    id another principal made costs the one look-up an unknown id costs, so
    no timing tells them apart.
    """
    unknown = RequestError(404, f"no response {echo(response_id)} here (unknown, or forgotten)")
    if not response_id.startswith(_RESPONSE_PREFIX):
        raise unknown
    try:
        live = await endpoints.stream_of(request, response_id.removeprefix(_RESPONSE_PREFIX))
    except UnknownStream:
        raise unknown from None
    kept = await endpoints.records.get(response_id)
    if kept is None:
        raise unknown
    record = json.loads(kept)
    return Answered(response_id, str(record["model"]), int(record["created"])), bool(record["background"]), live


async def _logged(registry: Registry, stream_id: str, count: int) -> list[str]:
    """The first ``count`` entries of ``stream_id`` in the log (``LogGap``, a 410, if it was trimmed)."""
    if count <= 0:
        return []
    if registry.aio is not None:
        return await registry.aio.read_after(stream_id, -1, count)
    return registry.log.read_after(stream_id, -1, count)


def _retrieve_query(query: str) -> tuple[bool, int]:
    """A retrieve's ``stream`` and ``starting_after`` (-1: from the start); raises ``RequestError`` 400."""
    pairs = parse_qsl(query, keep_blank_values=True)
    for name, value in pairs:
        if name not in _RETRIEVE_PARAMS:
            raise RequestError(400, f"unknown parameter {echo(name)} (given {echo(value)}); allowed: "
                                    f"{', '.join(_RETRIEVE_PARAMS[:3])}")
    given = dict(pairs)
    stream = given.get("stream", "false")
    if stream not in ("true", "false"):
        raise RequestError(400, f"stream must be true or false, got {echo(stream)}")
    after = given.get("starting_after")
    return stream == "true", -1 if after is None else parse_count("starting_after", after)


async def retrieve_response(endpoints: Endpoints, request: LiveRequest, response_id: str) -> OpenStream | Answer:
    """``GET /v1/responses/{id}``: the response object, or with ``stream=true`` its events after ``starting_after``."""
    streamed, after = _retrieve_query(request.query)
    answered, background, live = await _found(endpoints, request, response_id)
    registry, stream_id = endpoints.registry, live.stream_id
    generated, state = await registry.progress_async(stream_id)
    ended = state is not StreamState.GENERATING
    if not streamed:
        ending = live.stream.ending
        return _whole(answered, await _logged(registry, stream_id, generated), _status(state, ending), ending,
                      background)
    # Where the reader is in the log so far (a trimmed log is a 410 now, while a status can say so).
    while True:
        try:
            resumed = resume(answered, background, after, await _logged(registry, stream_id, generated), ended)
            break
        except PastTheEnd:                      # a shared log went back: lost, or it grew meanwhile (look again)
            if registry.aio is None:
                raise
            await rules.lost_if_behind(registry, stream_id, generated)
            generated, state = await registry.progress_async(stream_id)
            ended = state is not StreamState.GENERATING
    rules.take_slot(registry)
    return OpenStream(live, resumed.cursor, None, None, None, resumed.rendering, resumed=after >= 0)


async def cancel_response(endpoints: Endpoints, request: LiveRequest, response_id: str) -> Answer:
    """``POST /v1/responses/{id}/cancel``: stop its generation wherever it runs; the object as it ended.

    A response that had ended already stays as it was (``completed``, ``failed``); a second cancel answers the same.
    """
    answered, background, live = await _found(endpoints, request, response_id)
    registry, stream_id = endpoints.registry, live.stream_id
    state = await registry.stop_async(stream_id)
    generated, _ = await registry.progress_async(stream_id)
    # A token being made when the stop came may still be logged: the answer is what a reader gets to the end.
    gathered = await _gather(endpoints, live, Gathered(await _logged(registry, stream_id, generated)))
    return _whole(answered, gathered.tokens, _status(state, gathered.ending), gathered.ending, background)


def models_answer(model_ids: list[str]) -> Answer:
    """``GET /v1/models``: the models this server answers as."""
    return _json_answer({"object": "list", "data": [{"id": name, "object": "model", "created": 0,
                                                      "owned_by": "tokenwire"} for name in model_ids]})
