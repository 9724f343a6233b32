"""LangChain's message chunks to parts: what ``chat_model.astream(...)`` (or an agent's messages) yields, as parts.

How this works: ``LangChainParts.feed`` takes one ``AIMessageChunk``: its
``content`` is text (a ``str``, or a list of content blocks: ``text``, and
``thinking`` or ``reasoning`` as ``Reasoning``), ``additional_kwargs``'
``reasoning_content`` (DeepSeek's) ``Reasoning`` too; ``tool_call_chunks``
are read by ``index``: a new index is a ``ToolCallStart`` (its ``id`` and
``name``), each ``args`` piece a ``ToolCallDelta``, and the call ends
(``ToolCallEnd``, the arguments parsed) when the next index starts, at the
finish or at the stream's end.  ``response_metadata``'s ``finish_reason``
(OpenAI's words) or ``stop_reason`` (Anthropic's) is ``Finish``, and
``usage_metadata`` ``Usage``.  A ``ToolMessage`` (an agent ran the tool) is
the call's ``ToolResult`` (``status="error"``: its content is the error),
and the next ``AIMessageChunk`` after it begins a new ``Step``.  No I/O,
and langchain-core is never imported.
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
    Step,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolResult,
    Usage,
)

__all__ = ["LangChainParts"]

# How much of a bad chunk an error quotes.
_QUOTE_CHARS = 120
# The finish reasons LangChain's providers put in response_metadata, in tokenwire's words.
_REASONS = {"stop": "stop", "end_turn": "stop", "stop_sequence": "stop", "STOP": "stop", "length": "length",
            "max_tokens": "length", "MAX_TOKENS": "length", "tool_calls": "tool_calls", "tool_use": "tool_calls",
            "function_call": "tool_calls", "content_filter": "content_filter", "refusal": "content_filter"}


def _quote(value: object) -> str:
    text = repr(value)
    return text if len(text) <= _QUOTE_CHARS else text[:_QUOTE_CHARS] + "..."


def _count(usage: Mapping[str, Any], name: str, details: str | None = None) -> int:
    where = usage.get(details) if details else usage
    value = where.get(name) if isinstance(where, Mapping) else None
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise PartError(f"usage_metadata's {name} must be an int >= 0, got {_quote(value)}")
    return value


class LangChainParts:
    """One answer's LangChain message chunks in, its parts out (see the module)."""

    __slots__ = ("_call", "_ended", "_index", "_stepped")

    def __init__(self) -> None:
        self._call: tuple[str, str, list[str]] | None = None     # the call streaming: id, name, arguments so far
        self._index: object = None                              # its index in tool_call_chunks
        self._ended: set[str] = set()
        self._stepped = False                                   # a tool result came: the next chunk is a new step

    def feed(self, chunk: Any) -> list[str | Part]:
        """The parts ``chunk`` completes; ``PartError`` naming a chunk that is none."""
        kind = getattr(chunk, "type", None)
        if kind == "tool":
            return self._result(chunk)
        if kind != "AIMessageChunk":
            raise PartError(f"a LangChain message that is no AIMessageChunk or ToolMessage: {_quote(chunk)}")
        parts: list[str | Part] = []
        if self._stepped:
            self._stepped = False
            parts.append(Step())
        self._content(chunk.content, parts)
        reasoning = (chunk.additional_kwargs or {}).get("reasoning_content")
        if isinstance(reasoning, str) and reasoning:
            parts.append(Reasoning(reasoning))
        for piece in chunk.tool_call_chunks or ():
            self._piece(piece, parts)
        metadata = chunk.response_metadata or {}
        reason = metadata.get("finish_reason") or metadata.get("stop_reason")
        if reason:
            parts.extend(self._end_call())
            parts.append(Finish(_REASONS.get(str(reason), "other")))
        usage = chunk.usage_metadata
        if usage:
            parts.append(Usage(_count(usage, "input_tokens"), _count(usage, "output_tokens"),
                               _count(usage, "reasoning", "output_token_details"),
                               _count(usage, "cache_read", "input_token_details")))
        return parts

    def close(self) -> list[Part]:
        """The parts the stream's end completes: the end of a call still open."""
        return list(self._end_call())

    def _content(self, content: object, parts: list[str | Part]) -> None:
        if isinstance(content, str):
            if content:
                parts.append(content)
            return
        if not isinstance(content, list):
            raise PartError(f"an AIMessageChunk's content must be a str or a list of blocks, got {_quote(content)}")
        for block in content:
            if isinstance(block, str):
                parts.extend([block] if block else [])
            elif isinstance(block, Mapping):
                kind = block.get("type")
                text = block.get("text") if kind == "text" else block.get(kind) if kind in ("thinking",
                                                                                          "reasoning") else None
                if isinstance(text, str) and text:
                    parts.append(text if kind == "text" else Reasoning(text))

    def _piece(self, piece: Mapping[str, Any], parts: list[str | Part]) -> None:
        index, call_id, name = piece.get("index"), piece.get("id"), piece.get("name")
        if self._call is None or (index is not None and index != self._index) or (index is None and call_id):
            parts.extend(self._end_call())
            if not isinstance(name, str) or not name:
                raise PartError(f"the tool call at index {index!r} starts with no name: {_quote(dict(piece))}")
            call_id = call_id if isinstance(call_id, str) and call_id else f"call_{index}"
            if call_id in self._ended:
                raise PartError(f"the tool call {call_id!r} was started already: {_quote(dict(piece))}")
            self._call, self._index = (call_id, name, []), index
            parts.append(ToolCallStart(call_id, name))
        args = piece.get("args")
        if args:
            if not isinstance(args, str):
                raise PartError(f"a tool call chunk's args must be a string, got {_quote(args)}")
            self._call[2].append(args)
            parts.append(ToolCallDelta(self._call[0], args))

    def _end_call(self) -> list[Part]:
        if self._call is None:
            return []
        (call_id, name, pieces), self._call, self._index = self._call, None, None
        self._ended.add(call_id)
        text = "".join(pieces)
        try:
            return [ToolCallEnd(call_id, json.loads(text) if text.strip() else {})]
        except ValueError:
            raise PartError(f"the tool call {call_id!r} ({name}) ended with arguments that are not JSON: "
                            f"{text[:_QUOTE_CHARS]!r}") from None

    def _result(self, message: Any) -> list[str | Part]:
        parts: list[str | Part] = list(self._end_call())
        call_id, content = getattr(message, "tool_call_id", None), getattr(message, "content", None)
        if not isinstance(call_id, str) or not call_id:
            raise PartError(f"a ToolMessage needs its tool_call_id, got {_quote(message)}")
        if getattr(message, "status", "success") == "error":
            parts.append(ToolResult(call_id, error=content if isinstance(content, str) else json.dumps(content)))
        else:
            parts.append(ToolResult(call_id, output=content))
        self._stepped = True
        return parts
