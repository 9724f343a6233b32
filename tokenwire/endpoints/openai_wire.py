"""OpenAI's wire: a tokenwire stream rendered as chat completion chunks or as Responses events.

How this works: a stream is indexed tokens plus an ending; these renderings
put it on the wire as the ``openai`` SDK reads it, each event one
``data:`` line of JSON and no ``id`` (the SDK resumes a response by
``starting_after``, not ``Last-Event-ID``).

``ChatChunks`` (``POST /v1/chat/completions`` with ``stream: true``): a first
``chat.completion.chunk`` with ``delta.role``, one chunk per token with
``delta.content``, a last chunk with ``finish_reason`` (``"stop"``;
``"abort"``, as vLLM says it, for a stream stopped early), the usage chunk
if ``stream_options.include_usage`` asked for it, then ``data: [DONE]``.  A
model that failed sends OpenAI's mid-stream error, ``data: {"error":
{...}}``, which the SDK raises as ``APIError`` naming the failure.

``ResponseEvents`` (``POST /v1/responses`` with ``stream``, and
``GET /v1/responses/{id}?stream=true``): every event carries its
``sequence_number``, and the numbers are the stream's own, the same on
every replay and every instance: ``response.created`` (0),
``response.in_progress`` (1), ``response.output_item.added`` (2),
``response.content_part.added`` (3), token ``i`` is the
``response.output_text.delta`` numbered ``PREAMBLE + i``, and after the last
token ``response.output_text.done``, ``response.content_part.done``,
``response.output_item.done`` and the end: ``response.completed``,
``response.failed`` (a model that failed) or ``response.incomplete`` (stopped
early: status ``cancelled`` when it was stopped, ``incomplete`` otherwise).
The arithmetic between event and token numbers is here and only here, as
``ui_stream``'s is for the AI SDK's chunks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..core.endings import EarlyEnd
from ..core.frames import TokenItem
from ..core.rendering import Rendered
from .ui_stream import DONE

__all__ = ["ENDING_EVENTS", "PREAMBLE", "ChatChunks", "Gathered", "ResponseEvents", "Answered", "chat_completion",
           "cursor_of", "event_count", "finish_reason", "response_object", "response_status"]

# Events before the first token: created, in_progress, output_item.added, content_part.added.
PREAMBLE = 4
# Events after the last token: output_text.done, content_part.done, output_item.done, and the end.
ENDING_EVENTS = 4
# What ends a stream stopped early, as vLLM names an aborted request's finish.
_ABORT = "abort"
# An early end with this reason was asked for (``POST .../stop``, ``.../cancel``): the response is cancelled.
_STOPPED = "stopped"


def _json(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))


def finish_reason(ending: EarlyEnd | None) -> str:
    """A chat completion's ``finish_reason``: ``stop``, or ``abort`` for a stream that ended early."""
    return "stop" if ending is None else _ABORT


def _error(message: str) -> dict[str, Any]:
    return {"message": message, "type": "server_error", "code": None}


@dataclass(frozen=True, slots=True)
class Answered:
    """Who answers and when: the completion's or response's ``id``, ``model`` and ``created`` (Unix seconds)."""

    id: str
    model: str
    created: int


# -- chat completions ------------------------------------------------------------------------
@dataclass(slots=True)
class ChatChunks:
    """The ``Rendering`` of a streamed chat completion (one connection, from the start)."""

    answered: Answered
    include_usage: bool = False
    _head: bytes = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._head = self._chunk_head().encode()

    def _chunk_head(self) -> str:
        answered = self.answered
        return (f'data: {{"id":{_json(answered.id)},"object":"chat.completion.chunk","created":{answered.created},'
                f'"model":{_json(answered.model)},"choices":[')

    def _chunk(self, choices: str, extra: str = "") -> bytes:
        return self._head + f"{choices}]{extra}}}\n\n".encode()

    def opening(self, stream: Rendered, cursor: int) -> bytes:
        return self._chunk('{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}')

    def token(self, item: TokenItem) -> bytes:
        return (self._head + b'{"index":0,"delta":{"content":' + json.dumps(item.text).encode()
                + b'},"finish_reason":null}]}\n\n')

    def closing(self, stream: Rendered, delivered_from: int, dropped: int) -> bytes:
        ending = stream.ending
        if ending is not None and ending.error is not None:
            return f"data: {_json({'error': _error(ending.error)})}\n\n".encode() + DONE
        frames = [self._chunk(f'{{"index":0,"delta":{{}},"finish_reason":"{finish_reason(ending)}"}}')]
        if self.include_usage:
            frames.append(self._chunk("", f',"usage":{_json(usage(stream.total))}'))
        return b"".join(frames) + DONE


def usage(completion_tokens: int) -> dict[str, int]:
    """The usage of an answer of ``completion_tokens`` tokens (the prompt is not tokenized here: 0)."""
    return {"prompt_tokens": 0, "completion_tokens": completion_tokens, "total_tokens": completion_tokens}


def chat_completion(answered: Answered, text: str, tokens: int, ending: EarlyEnd | None) -> dict[str, Any]:
    """The ``chat.completion`` object of a whole answer (``POST /v1/chat/completions`` without ``stream``)."""
    return {"id": answered.id, "object": "chat.completion", "created": answered.created, "model": answered.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": None},
                         "logprobs": None, "finish_reason": finish_reason(ending)}],
            "usage": usage(tokens)}


@dataclass(slots=True)
class Gathered:
    """The ``Rendering`` of a reader inside the server: it puts nothing on a wire and keeps the text and ending."""

    tokens: list[str] = field(default_factory=list)
    ended: bool = False
    ending: EarlyEnd | None = None

    def opening(self, stream: Rendered, cursor: int) -> bytes:
        return b""

    def token(self, item: TokenItem) -> bytes:
        self.tokens.append(item.text)
        return b""

    def closing(self, stream: Rendered, delivered_from: int, dropped: int) -> bytes:
        self.ended, self.ending = True, stream.ending
        return b""


# -- responses --------------------------------------------------------------------------------
def cursor_of(starting_after: int) -> int:
    """The exclusive token cursor of a reader that has events ``0..starting_after`` (-1: no token yet)."""
    return max(-1, starting_after - PREAMBLE)


def event_count(generated: int, ended: bool) -> int:
    """Events there are so far: the preamble and ``generated`` deltas, plus the ending once ``ended``."""
    return PREAMBLE + generated + (ENDING_EVENTS if ended else 0)


def response_status(ending: EarlyEnd | None, ended: bool) -> str:
    """A response's ``status``: in_progress, completed, failed, cancelled (stopped) or incomplete."""
    if not ended:
        return "in_progress"
    if ending is None:
        return "completed"
    if ending.error is not None:
        return "failed"
    return "cancelled" if ending.reason == _STOPPED else "incomplete"


def _message_id(response_id: str) -> str:
    return f"msg_{response_id.removeprefix('resp_')}"


def _part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _item(response_id: str, text: str | None, done: bool) -> dict[str, Any]:
    content = [] if text is None else [_part(text)]
    return {"id": _message_id(response_id), "type": "message", "status": "completed" if done else "in_progress",
            "role": "assistant", "content": content}


def response_object(answered: Answered, status: str, text: str | None, tokens: int, *, background: bool,
                    error: str | None = None) -> dict[str, Any]:
    """The ``response`` object: ``status``, and the output message holding ``text`` (None: no output yet)."""
    done = status != "in_progress"
    return {"id": answered.id, "object": "response", "created_at": answered.created, "status": status,
            "background": background, "error": None if error is None else {"code": "server_error",
                                                                            "message": error},
            "incomplete_details": None, "instructions": None, "max_output_tokens": None, "metadata": {},
            "model": answered.model, "output": [] if text is None else [_item(answered.id, text, done)],
            "parallel_tool_calls": True, "previous_response_id": None, "reasoning": None, "store": True,
            "temperature": 1.0, "text": {"format": {"type": "text"}}, "tool_choice": "auto", "tools": [],
            "top_p": 1.0, "truncation": "disabled", "usage": None if not done else _response_usage(tokens)}


def _response_usage(tokens: int) -> dict[str, Any]:
    return {"input_tokens": 0, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": tokens,
            "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": tokens}


def _event(kind: str, number: int, body: dict[str, Any]) -> bytes:
    return f"event: {kind}\ndata: {_json({'type': kind, 'sequence_number': number, **body})}\n\n".encode()


@dataclass(slots=True)
class ResponseEvents:
    """The ``Rendering`` of one connection to a response's events after event ``starting_after`` (-1: all).

    ``prefix``: the tokens the reader has already (``0..cursor_of(starting_after)``), read from
    the log before the connection opens, so that the events that carry the whole text can say it.
    """

    answered: Answered
    background: bool
    starting_after: int = -1
    prefix: list[str] = field(default_factory=list)
    _where: str = field(init=False, repr=False)
    _where_fields: dict[str, Any] = field(init=False, repr=False)
    _delta_head: bytes = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.starting_after, bool) or not isinstance(self.starting_after, int) \
                or self.starting_after < -1:
            raise ValueError(f"starting_after must be an event number >= -1, got {self.starting_after!r}")
        self._where_fields = {"item_id": _message_id(self.answered.id), "output_index": 0, "content_index": 0}
        self._where = _json(self._where_fields)[1:-1]
        self._delta_head = f'event: response.output_text.delta\ndata: {{"type":"response.output_text.delta",' \
                           f'{self._where},"logprobs":[],"sequence_number":'.encode()

    def _response(self, status: str, text: str | None, tokens: int, error: str | None = None) -> dict[str, Any]:
        return response_object(self.answered, status, text, tokens, background=self.background, error=error)

    def opening(self, stream: Rendered, cursor: int) -> bytes:
        where = self._where_fields
        first = "queued" if self.background else "in_progress"
        events: list[tuple[str, dict[str, Any]]] = [
                  ("response.created", {"response": self._response(first, None, 0)}),
                  ("response.in_progress", {"response": self._response("in_progress", None, 0)}),
                  ("response.output_item.added",
                   {"output_index": 0, "item": _item(self.answered.id, None, False)}),
                  ("response.content_part.added", {**where, "part": _part("")})]
        return b"".join(_event(kind, n, body) for n, (kind, body) in enumerate(events) if n > self.starting_after)

    def token(self, item: TokenItem) -> bytes:
        self.prefix.append(item.text)
        return b"%s%d,\"delta\":%s}\n\n" % (self._delta_head, PREAMBLE + item.index, json.dumps(item.text).encode())

    def closing(self, stream: Rendered, delivered_from: int, dropped: int) -> bytes:
        text, ending, total = "".join(self.prefix), stream.ending, stream.total
        where = self._where_fields
        status = response_status(ending, True)
        error = ending.error if ending is not None else None
        last = {"completed": "response.completed", "failed": "response.failed"}.get(status, "response.incomplete")
        events: list[tuple[str, dict[str, Any]]] = [
                  ("response.output_text.done", {**where, "text": text, "logprobs": []}),
                  ("response.content_part.done", {**where, "part": _part(text)}),
                  ("response.output_item.done", {"output_index": 0, "item": _item(self.answered.id, text, True)}),
                  (last, {"response": self._response(status, text, total, error)})]
        first = PREAMBLE + total
        return b"".join(_event(kind, n, body) for n, (kind, body) in enumerate(events, first)
                        if n > self.starting_after)
