"""OpenAI's chat completions: a tokenwire stream rendered as ``chat.completion.chunk``s, or whole.

How this works: ``ChatChunks`` (``POST /v1/chat/completions`` with
``stream: true``) sends a first chunk with ``delta.role``, then one chunk
per entry of the log: text is ``delta.content`` (the fast path: a plain
``str`` entry is never decoded), reasoning is ``delta.reasoning_content``
and ``delta.reasoning`` both (SGLang and DeepSeek send the first, vLLM the
second: a client finds its own), a refusal is ``delta.refusal``, a tool
call's start is ``delta.tool_calls: [{index, id, type: "function",
function: {name, arguments: ""}}]`` and each argument delta ``[{index,
function: {arguments}}]`` (``index``: the call's order in the answer, by
which the SDK's ``ChatCompletionStreamState`` accumulates a call); a call
whose arguments came in no delta gets them whole in one at its end.  The
other parts (a tool's result, sources, files, data, steps) have no chunk.
The last chunk carries the real ``finish_reason``: ``abort`` (as vLLM says
it) for a stream that ended early, else the ``Finish`` part's reason, else
``tool_calls`` when the answer's last step made calls, else ``stop``; then
the usage chunk if ``stream_options.include_usage`` asked for it (the last
``Usage`` part's figures; without one, the entries counted as completion
tokens) and ``data: [DONE]``.  A model that failed sends OpenAI's mid-stream
``data: {"error": {...}}``, which the SDK raises as ``APIError``.

``chat_completion`` is the same answer whole (no ``stream``): the
``message`` with ``content``, ``refusal``, ``tool_calls`` (full arguments),
the reasoning under both names, the real ``finish_reason`` and ``usage``.
Chat chunks carry no numbers, so a chat completion has no resume arithmetic.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..core.endings import EarlyEnd
from ..core.frames import TokenItem
from ..core.parts import (
    PART_MARK,
    Finish,
    Part,
    Reasoning,
    Refusal,
    Step,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
    decode,
)
from ..core.rendering import Rendered
from .openai_wire import Answered, compact_json, error_body
from .ui_stream import DONE

__all__ = ["ABORT", "ChatChunks", "chat_completion", "usage"]

# What ends a stream stopped early, as vLLM names an aborted request's finish.
ABORT = "abort"


def usage(completion_tokens: int, part: Usage | None = None) -> dict[str, Any]:
    """A chat completion's ``usage``: the ``Usage`` part's figures, or ``completion_tokens`` entries (the prompt
    is not tokenized here: 0)."""
    if part is None:
        return {"prompt_tokens": 0, "completion_tokens": completion_tokens, "total_tokens": completion_tokens}
    return {"prompt_tokens": part.input_tokens, "completion_tokens": part.output_tokens,
            "total_tokens": part.total_tokens, "prompt_tokens_details": {"cached_tokens": part.cached_input_tokens},
            "completion_tokens_details": {"reasoning_tokens": part.reasoning_tokens}}


@dataclass(slots=True)
class _Facts:
    """What the end of an answer says, learnt part by part: each call's index, the finish, the usage."""

    calls: dict[str, int] = field(default_factory=dict)      # a call's id -> its order in the answer
    argued: set[str] = field(default_factory=set)            # the calls whose arguments came in deltas
    step_called: bool = False                                # the answer's last step made a call
    finish: str | None = None
    usage: Usage | None = None

    def see(self, part: Part | str) -> None:
        if isinstance(part, ToolCallStart):
            self.calls.setdefault(part.call_id, len(self.calls))
            self.step_called = True
        elif isinstance(part, ToolCallDelta) and part.arguments:
            self.argued.add(part.call_id)
        elif isinstance(part, Step):
            self.step_called = False
        elif isinstance(part, Usage):
            self.usage = part
        elif isinstance(part, Finish):
            self.finish = part.reason

    def finish_reason(self, ending: EarlyEnd | None) -> str:
        if ending is not None:
            return ABORT
        if self.finish is not None:
            return self.finish
        return "tool_calls" if self.step_called else "stop"


def _delta(facts: _Facts, part: Part | str) -> dict[str, Any] | None:
    """The ``delta`` of one entry's chunk (None: no chunk), once ``facts`` have seen it."""
    facts.see(part)
    if isinstance(part, str):
        return {"content": part}
    if isinstance(part, Reasoning):
        return {"reasoning_content": part.text, "reasoning": part.text}
    if isinstance(part, Refusal):
        return {"refusal": part.text}
    if isinstance(part, ToolCallStart):
        return {"tool_calls": [{"index": facts.calls[part.call_id], "id": part.call_id, "type": "function",
                                "function": {"name": part.name, "arguments": ""}}]}
    if isinstance(part, ToolCallDelta) and part.call_id in facts.calls:
        return {"tool_calls": [{"index": facts.calls[part.call_id], "function": {"arguments": part.arguments}}]}
    if isinstance(part, ToolCallEnd) and part.call_id in facts.calls and part.call_id not in facts.argued:
        return {"tool_calls": [{"index": facts.calls[part.call_id],
                                "function": {"arguments": json.dumps(part.input)}}]}
    return None


@dataclass(slots=True)
class ChatChunks:
    """The ``Rendering`` of a streamed chat completion (one connection, from the start)."""

    answered: Answered
    include_usage: bool = False
    _head: bytes = field(init=False, repr=False)
    _facts: _Facts = field(init=False, repr=False, default_factory=_Facts)

    def __post_init__(self) -> None:
        answered = self.answered
        self._head = (f'data: {{"id":{compact_json(answered.id)},"object":"chat.completion.chunk",'
                      f'"created":{answered.created},"model":{compact_json(answered.model)},"choices":[').encode()

    def _chunk(self, choices: str, extra: str = "") -> bytes:
        return self._head + f"{choices}]{extra}}}\n\n".encode()

    def opening(self, stream: Rendered, cursor: int) -> bytes:
        return self._chunk('{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}')

    def token(self, item: TokenItem) -> bytes:
        entry = item.text
        if entry[:1] != PART_MARK:
            return (self._head + b'{"index":0,"delta":{"content":' + json.dumps(entry).encode()
                    + b'},"finish_reason":null}]}\n\n')
        delta = _delta(self._facts, decode(entry))
        return b"" if delta is None else self._chunk(f'{{"index":0,"delta":{compact_json(delta)},'
                                                     f'"finish_reason":null}}')

    def closing(self, stream: Rendered, delivered_from: int, dropped: int) -> bytes:
        ending = stream.ending
        if ending is not None and ending.error is not None:
            return f"data: {compact_json({'error': error_body(ending.error)})}\n\n".encode() + DONE
        reason = self._facts.finish_reason(ending)
        frames = [self._chunk(f'{{"index":0,"delta":{{}},"finish_reason":{compact_json(reason)}}}')]
        if self.include_usage:
            frames.append(self._chunk("", f',"usage":{compact_json(usage(stream.total, self._facts.usage))}'))
        return b"".join(frames) + DONE


@dataclass(slots=True)
class _Message:
    """A whole answer's message, entry by entry: its text, reasoning, refusal and calls (with full arguments)."""

    facts: _Facts = field(default_factory=_Facts)
    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    refusal: list[str] = field(default_factory=list)
    calls: dict[str, dict[str, Any]] = field(default_factory=dict)     # a call's id -> its tool_calls item
    arguments: dict[str, list[str]] = field(default_factory=dict)

    def add(self, entry: str) -> None:
        part = decode(entry) if entry[:1] == PART_MARK else entry
        self.facts.see(part)
        if isinstance(part, str):
            self.text.append(part)
        elif isinstance(part, Reasoning | Refusal):
            (self.reasoning if isinstance(part, Reasoning) else self.refusal).append(part.text)
        elif isinstance(part, ToolCallStart):
            self.calls[part.call_id] = {"id": part.call_id, "type": "function",
                                        "function": {"name": part.name, "arguments": ""}}
            self.arguments[part.call_id] = []
        elif isinstance(part, ToolCallDelta) and part.call_id in self.arguments:
            self.arguments[part.call_id].append(part.arguments)
        elif isinstance(part, ToolCallEnd) and part.call_id in self.arguments and not self.arguments[part.call_id]:
            self.arguments[part.call_id].append(json.dumps(part.input))

    def message(self) -> dict[str, Any]:
        text, calls = "".join(self.text), list(self.calls.values())
        for call in calls:
            call["function"]["arguments"] = "".join(self.arguments[call["id"]])
        message: dict[str, Any] = {"role": "assistant", "content": None if calls and not text else text,
                                   "refusal": "".join(self.refusal) or None}
        if calls:
            message["tool_calls"] = calls
        if self.reasoning:
            message["reasoning_content"] = message["reasoning"] = "".join(self.reasoning)
        return message


def chat_completion(answered: Answered, entries: list[str], ending: EarlyEnd | None) -> dict[str, Any]:
    """The ``chat.completion`` object of a whole answer (``POST /v1/chat/completions`` without ``stream``)."""
    whole = _Message()
    for entry in entries:
        whole.add(entry)
    return {"id": answered.id, "object": "chat.completion", "created": answered.created, "model": answered.model,
            "choices": [{"index": 0, "message": whole.message(), "logprobs": None,
                         "finish_reason": whole.facts.finish_reason(ending)}],
            "usage": usage(len(entries), whole.facts.usage)}
