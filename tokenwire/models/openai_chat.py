"""Chat completion chunks to parts: what an OpenAI-compatible server streams, as tokenwire's typed parts.

How this works: ``ChunkParts.feed`` takes one ``chat.completion.chunk`` (a
dict as read from the wire, or the openai SDK's ``ChatCompletionChunk``, by
its ``model_dump()``) and returns the parts it completes, in order:

- ``delta.content`` is text (a plain ``str``, the fast path);
- ``delta.reasoning`` (vLLM) or ``delta.reasoning_content`` (SGLang,
  DeepSeek) is ``Reasoning`` (one of them: a server that sends both sends
  the same words);
- ``delta.refusal`` is ``Refusal``;
- ``delta.tool_calls`` are read by ``index``: a new index is a
  ``ToolCallStart`` with the piece's ``id`` and ``function.name``, each
  ``function.arguments`` piece a ``ToolCallDelta``, and the call ends
  (``ToolCallEnd``, its arguments parsed as JSON; none at all: ``{}``) when
  the next index starts, at the ``finish_reason`` or at the stream's end
  (``close``);
- ``finish_reason`` is ``Finish`` (``function_call`` as ``tool_calls``, a
  reason tokenwire does not know, such as vLLM's ``abort``, as ``other``);
- ``usage`` is ``Usage``: the ``include_usage`` chunk's (its choices
  empty); a server that puts its usage on a chunk with choices instead has it
  sent at ``close`` unless a usage chunk came after.

It keeps the state a stream of chunks needs (the calls by index), so one
``ChunkParts`` reads one answer.  One answer: a choice whose ``index`` is not
0 (``n`` > 1) is refused, never spliced into the first.  Anything that is
not a chunk, or a part that cannot be one (arguments that are not JSON at the
call's end, a piece for a call that ended, a new call with no name), raises
``PartError`` naming it.  No I/O, and the openai package is never imported.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..core.parts import (
    Finish,
    Part,
    PartError,
    Reasoning,
    Refusal,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)

__all__ = ["ChunkParts", "finish_reason", "usage_of"]

# How much of a bad chunk or a bad value an error quotes.
_QUOTE_CHARS = 120
# The finish reasons of chat completions that are tokenwire's under another name.
_REASONS = {"stop": "stop", "length": "length", "tool_calls": "tool_calls", "content_filter": "content_filter",
            "function_call": "tool_calls", "error": "error"}


def _quote(value: object) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= _QUOTE_CHARS else text[:_QUOTE_CHARS] + "..."


def finish_reason(reason: object) -> Finish:
    """The ``Finish`` of a chunk's ``finish_reason``: its own name where tokenwire has it, else ``other``."""
    if not isinstance(reason, str):
        raise PartError(f"a finish_reason must be a string, got {_quote(reason)}")
    return Finish(_REASONS.get(reason, "other"))


def _count(usage: Mapping[str, Any], name: str, details: str | None = None) -> int:
    where = usage.get(details) if details else usage
    value = where.get(name) if isinstance(where, Mapping) else None
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise PartError(f"usage's {details + '.' if details else ''}{name} must be an int >= 0, got {_quote(value)}")
    return value


def usage_of(usage: object) -> Usage:
    """The ``Usage`` of a chunk's ``usage`` (``prompt_tokens``, ``completion_tokens`` and their details)."""
    if not isinstance(usage, Mapping):
        raise PartError(f"a chunk's usage must be an object, got {_quote(usage)}")
    return Usage(input_tokens=_count(usage, "prompt_tokens"), output_tokens=_count(usage, "completion_tokens"),
                 reasoning_tokens=_count(usage, "reasoning_tokens", "completion_tokens_details"),
                 cached_input_tokens=_count(usage, "cached_tokens", "prompt_tokens_details"))


class _Call:
    """A tool call being streamed: its id, its name, its arguments so far."""

    __slots__ = ("arguments", "call_id", "name")

    def __init__(self, call_id: str, name: str) -> None:
        self.call_id, self.name = call_id, name
        self.arguments: list[str] = []

    def end(self) -> ToolCallEnd:
        """The call's end, its arguments parsed; ``PartError`` naming the call if they are not JSON."""
        text = "".join(self.arguments)
        if not text.strip():
            return ToolCallEnd(self.call_id, {})        # a tool without parameters, called with nothing
        try:
            return ToolCallEnd(self.call_id, json.loads(text))
        except ValueError:
            raise PartError(f"the tool call {self.call_id!r} ({self.name}) ended with arguments that are not "
                            f"JSON: {_quote(text)}") from None


class ChunkParts:
    """One answer's chat completion chunks in, its parts out (see the module)."""

    __slots__ = ("_call", "_ended", "_finished", "_index", "_usage")

    def __init__(self) -> None:
        self._call: _Call | None = None         # the call streaming now
        self._index = -1                        # its index; the indexes before it have ended
        self._ended: set[str] = set()           # the ids of the calls that ended
        self._finished = False
        self._usage: Usage | None = None        # a usage that came on a chunk with choices, not yet sent

    def feed(self, chunk: object) -> list[str | Part]:
        """The parts ``chunk`` completes (often one text); ``PartError`` naming a chunk that is none."""
        if chunk.__class__ is dict:             # the fast path: a text delta alone, as most chunks are
            text = _text_only(chunk)
            if text is not None:
                return [text] if text else []
        if not isinstance(chunk, Mapping):
            dump = getattr(chunk, "model_dump", None)
            chunk = dump() if dump is not None else None
            if not isinstance(chunk, Mapping):
                raise PartError(f"a chat completion chunk must be an object, got {_quote(chunk)}")
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            raise PartError(f"a chat completion chunk needs a list of choices, got {_quote(chunk)}")
        parts: list[str | Part] = []
        for choice in choices:
            self._choice(choice, parts)
        usage = chunk.get("usage")
        if usage is not None:
            if choices:
                self._usage = usage_of(usage)   # sent at close, unless a usage chunk comes
            else:
                self._usage = None
                parts.append(usage_of(usage))
        return parts

    @property
    def finished(self) -> bool:
        """True once a ``finish_reason`` was read: only the usage chunk may follow."""
        return self._finished

    def close(self) -> list[Part]:
        """The parts the stream's end completes: the open call's end, a usage not yet sent."""
        parts: list[Part] = []
        if self._call is not None:
            parts.append(self._end_call())
        if self._usage is not None:
            parts.append(self._usage)
            self._usage = None
        return parts

    def _choice(self, choice: object, parts: list[str | Part]) -> None:
        if not isinstance(choice, Mapping):
            raise PartError(f"a chunk's choice must be an object, got {_quote(choice)}")
        index = choice.get("index", 0)
        if index != 0:
            raise PartError(f"a chunk with choice index {_quote(index)}: several choices (n > 1) are not one answer, "
                            f"and only choice 0 is read")
        delta = choice.get("delta")
        if delta is not None:
            if not isinstance(delta, Mapping):
                raise PartError(f"a choice's delta must be an object, got {_quote(delta)}")
            self._delta(delta, parts)
        reason = choice.get("finish_reason")
        if reason is not None:
            if self._finished:
                raise PartError(f"a second finish_reason {_quote(reason)}: the answer had finished")
            if self._call is not None:
                parts.append(self._end_call())
            parts.append(finish_reason(reason))
            self._finished = True

    def _delta(self, delta: Mapping[str, Any], parts: list[str | Part]) -> None:
        reasoning = delta.get("reasoning") or delta.get("reasoning_content")
        if reasoning:
            parts.append(Reasoning(_string(reasoning, "delta.reasoning")))
        content = delta.get("content")
        if content:
            parts.append(_string(content, "delta.content"))
        refusal = delta.get("refusal")
        if refusal:
            parts.append(Refusal(_string(refusal, "delta.refusal")))
        calls = delta.get("tool_calls")
        if calls is not None:
            if not isinstance(calls, list):
                raise PartError(f"delta.tool_calls must be a list, got {_quote(calls)}")
            for position, piece in enumerate(calls):
                self._piece(piece, position, parts)

    def _piece(self, piece: object, position: int, parts: list[str | Part]) -> None:
        """One piece of ``delta.tool_calls`` (``position``: its place in the list, its index if it has none)."""
        if not isinstance(piece, Mapping):
            raise PartError(f"a piece of delta.tool_calls must be an object, got {_quote(piece)}")
        index = piece.get("index", position)
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise PartError(f"a tool call's index must be an int >= 0, got {_quote(index)}")
        function = piece.get("function") or {}
        if not isinstance(function, Mapping):
            raise PartError(f"a tool call's function must be an object, got {_quote(function)}")
        if index != self._index:
            self._start(index, piece, function, parts)
        call = self._call
        assert call is not None                 # _start made it, or it is the one streaming
        arguments = function.get("arguments")
        if arguments:
            call.arguments.append(_string(arguments, f"the tool call {call.call_id!r}'s function.arguments"))
            parts.append(ToolCallDelta(call.call_id, arguments))

    def _start(self, index: int, piece: Mapping[str, Any], function: Mapping[str, Any],
               parts: list[str | Part]) -> None:
        if index < self._index:
            raise PartError(f"a piece of the tool call at index {index}, which ended when index {self._index} "
                            f"started: {_quote(dict(piece))}")
        if self._call is not None:
            parts.append(self._end_call())
        name, call_id = function.get("name"), piece.get("id") or f"call_{index}"
        if not isinstance(name, str) or not name:
            raise PartError(f"the tool call at index {index} starts with no function.name: {_quote(dict(piece))}")
        if not isinstance(call_id, str) or call_id in self._ended:
            raise PartError(f"the tool call at index {index} has an id that is no new string: {_quote(call_id)}")
        self._call, self._index = _Call(call_id, name), index
        parts.append(ToolCallStart(call_id, name))

    def _end_call(self) -> ToolCallEnd:
        call, self._call = self._call, None
        assert call is not None
        self._ended.add(call.call_id)
        return call.end()


def _text_only(chunk: dict[str, Any]) -> str | None:
    """The text of a chunk that is one choice 0 with a text delta and nothing else (None: any other chunk)."""
    choices = chunk.get("choices")
    if choices.__class__ is not list or len(choices) != 1 or chunk.get("usage") is not None:
        return None
    choice = choices[0]
    if choice.__class__ is not dict or choice.get("index", 0) != 0 or choice.get("finish_reason") is not None:
        return None
    delta = choice.get("delta")
    if delta.__class__ is not dict:
        return None
    content = delta.get("content")
    if content.__class__ is not str or delta.get("reasoning") or delta.get("reasoning_content") \
            or delta.get("refusal") or delta.get("tool_calls"):
        return None
    return content


def _string(value: object, name: str) -> str:
    if not isinstance(value, str):
        raise PartError(f"{name} must be a string, got {_quote(value)}")
    return value
