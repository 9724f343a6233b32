"""Anthropic's message stream events to parts: what ``client.messages.create(stream=True)`` yields, as parts.

How this works: ``AnthropicParts.feed`` takes one raw event (the anthropic
package's ``RawMessageStreamEvent`` objects, or their dicts; the events
``client.messages.stream()`` adds, ``text``, ``thinking``, ``input_json``...,
repeat the raw ones and are passed over).  Content blocks are read by their
``index``: a ``tool_use`` block's ``content_block_start`` is a
``ToolCallStart`` (its ``id`` and ``name``), each ``input_json_delta`` a
``ToolCallDelta`` and its ``content_block_stop`` the ``ToolCallEnd``, the
input parsed; ``text_delta`` is text, ``thinking_delta`` ``Reasoning``.
``message_delta``'s ``stop_reason`` is ``Finish`` (``end_turn`` and
``stop_sequence`` stop, ``max_tokens`` length, ``tool_use`` tool_calls,
``refusal`` content_filter, the rest other) and its usage (cumulative; the input
tokens ``message_start`` said where it gives none) ``Usage``.  No I/O, and the anthropic
package is never imported.
"""

from __future__ import annotations

import json
from typing import Any

from ..core.parts import Finish, Part, PartError, Reasoning, ToolCallDelta, ToolCallEnd, ToolCallStart, Usage
from .openai_responses import field

__all__ = ["AnthropicParts"]

# How much of a bad event an error quotes.
_QUOTE_CHARS = 120
_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls",
            "refusal": "content_filter", "model_context_window_exceeded": "length"}
# What ``client.messages.stream()`` adds to the raw events: each repeats one of them.
_DERIVED = frozenset({"text", "thinking", "input_json", "citation", "signature"})
_QUIET = frozenset({"message_stop", "ping"})


def _quote(value: object) -> str:
    dump = getattr(value, "model_dump", None)
    text = repr(dump() if dump is not None else value)
    return text if len(text) <= _QUOTE_CHARS else text[:_QUOTE_CHARS] + "..."


def _tokens(usage: Any, name: str) -> int:
    value = field(usage, name) if usage is not None else None
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise PartError(f"anthropic's usage {name} must be an int >= 0, got {_quote(value)}")
    return value


class AnthropicParts:
    """One message's stream events in, its parts out (see the module)."""

    __slots__ = ("_calls", "_input", "_cached")

    def __init__(self) -> None:
        self._calls: dict[int, tuple[str, list[str]]] = {}     # block index -> (tool use id, input so far)
        self._input = self._cached = 0

    def feed(self, event: Any) -> list[str | Part]:
        """The parts ``event`` completes; ``PartError`` naming an event that is none."""
        kind = field(event, "type")
        if kind == "content_block_delta":
            return self._delta(event)
        if kind == "content_block_start":
            return self._start(event)
        if kind == "content_block_stop":
            return self._stop(field(event, "index"))
        if kind == "message_start":
            usage = field(field(event, "message"), "usage")
            self._input, self._cached = _tokens(usage, "input_tokens"), _tokens(usage, "cache_read_input_tokens")
            return []
        if kind == "message_delta":
            return self._ending(event)
        if kind in _DERIVED or kind in _QUIET:
            return []
        raise PartError(f"an anthropic message stream event of an unknown type: {_quote(event)}")

    def close(self) -> list[str | Part]:
        """The parts the stream's end completes: the end of a tool use still open."""
        return [part for index in list(self._calls) for part in self._stop(index)]

    def _start(self, event: Any) -> list[str | Part]:
        block = field(event, "content_block")
        kind = field(block, "type")
        if kind == "text":
            return [field(block, "text")] if field(block, "text") else []
        if kind == "thinking":
            return [Reasoning(field(block, "thinking"))] if field(block, "thinking") else []
        if kind in ("tool_use", "server_tool_use"):
            call_id, name = field(block, "id"), field(block, "name")
            if not isinstance(call_id, str) or not isinstance(name, str):
                raise PartError(f"a tool_use block needs an id and a name, got {_quote(block)}")
            self._calls[field(event, "index")] = (call_id, [])
            return [ToolCallStart(call_id, name)]
        return []

    def _delta(self, event: Any) -> list[str | Part]:
        delta = field(event, "delta")
        kind = field(delta, "type")
        if kind == "text_delta":
            return [_string(field(delta, "text"), "text_delta's text")]
        if kind == "thinking_delta":
            return [Reasoning(_string(field(delta, "thinking"), "thinking_delta's thinking"))]
        if kind == "input_json_delta":
            index = field(event, "index")
            if index not in self._calls:
                raise PartError(f"input_json_delta for the content block {index!r}, which is no tool_use "
                                f"started: {_quote(event)}")
            call_id, pieces = self._calls[index]
            piece = _string(field(delta, "partial_json"), "input_json_delta's partial_json")
            pieces.append(piece)
            return [ToolCallDelta(call_id, piece)] if piece else []
        return []                                    # signature_delta, citations_delta: nothing to show

    def _stop(self, index: object) -> list[str | Part]:
        if index not in self._calls:
            return []
        call_id, pieces = self._calls.pop(index)
        text = "".join(pieces)
        try:
            return [ToolCallEnd(call_id, json.loads(text) if text.strip() else {})]
        except ValueError:
            raise PartError(f"the tool use {call_id!r} ended with an input that is not JSON: "
                            f"{text[:_QUOTE_CHARS]!r}") from None

    def _ending(self, event: Any) -> list[str | Part]:
        parts: list[str | Part] = [part for index in list(self._calls) for part in self._stop(index)]
        usage = field(event, "usage")
        if usage is not None:
            parts.append(Usage(input_tokens=_tokens(usage, "input_tokens") or self._input,     # cumulative, if given
                               output_tokens=_tokens(usage, "output_tokens"),
                               cached_input_tokens=_tokens(usage, "cache_read_input_tokens") or self._cached))
        reason = field(field(event, "delta"), "stop_reason")
        if reason is not None:
            parts.append(Finish(_REASONS.get(str(reason), "other")))
        return parts


def _string(value: object, name: str) -> str:
    if not isinstance(value, str):
        raise PartError(f"{name} must be a string, got {_quote(value)}")
    return value
