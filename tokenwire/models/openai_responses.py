"""OpenAI Responses stream events to parts: what ``client.responses.create(stream=True)`` yields, as parts.

How this works: ``ResponseParts.feed`` takes one event (the openai SDK's
``ResponseStreamEvent`` objects, or their dicts) and returns the parts it
completes: ``response.output_text.delta`` is text, the reasoning deltas
(``response.reasoning_summary_text.delta``, ``response.reasoning_text.delta``)
``Reasoning``, ``response.refusal.delta`` ``Refusal``; a ``function_call``
item's ``response.output_item.added`` is a ``ToolCallStart`` (its
``call_id`` and ``name``), each ``response.function_call_arguments.delta``
a ``ToolCallDelta`` of the call whose item it names, and
``response.function_call_arguments.done`` (or the item's
``response.output_item.done``) its ``ToolCallEnd``, the arguments parsed.
``response.completed`` gives ``Usage`` and ``Finish`` (``tool_calls`` when
the response made calls, else ``stop``); ``response.incomplete`` finishes
``length`` (or ``content_filter``), ``response.failed`` ``error``.  The other
events (created, the ``.done`` of a text, ...) say nothing new.  No I/O,
and the openai package is never imported.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..core.parts import Finish, Part, PartError, Reasoning, Refusal, ToolCallDelta, ToolCallEnd, ToolCallStart, Usage

__all__ = ["ResponseParts", "field"]

# How much of a bad event an error quotes.
_QUOTE_CHARS = 120
_REASONING = frozenset({"response.reasoning_summary_text.delta", "response.reasoning_text.delta"})


def field(item: Any, name: str) -> Any:
    """``item``'s field ``name``, whether it is a dict or an SDK object (None if it has none)."""
    return item.get(name) if isinstance(item, Mapping) else getattr(item, name, None)


def _quote(value: object) -> str:
    dump = getattr(value, "model_dump", None)
    text = repr(dump() if dump is not None else value)
    return text if len(text) <= _QUOTE_CHARS else text[:_QUOTE_CHARS] + "..."


def _delta(event: Any, kind: str) -> str:
    delta = field(event, "delta")
    if not isinstance(delta, str):
        raise PartError(f"a {kind} event's delta must be a string, got {_quote(delta)}")
    return delta


def _count(usage: Any, name: str, details: str | None = None) -> int:
    where = field(usage, details) if details else usage
    value = None if where is None else field(where, name)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise PartError(f"a response's usage {name} must be an int >= 0, got {_quote(value)}")
    return value


class ResponseParts:
    """One response's stream events in, its parts out (see the module)."""

    __slots__ = ("_calls", "_ended", "_made_calls")

    def __init__(self) -> None:
        self._calls: dict[str, tuple[str, list[str]]] = {}     # item id -> (call id, arguments so far)
        self._ended: set[str] = set()                           # the item ids of calls that ended
        self._made_calls = False

    def feed(self, event: Any) -> list[str | Part]:
        """The parts ``event`` completes; ``PartError`` naming an event that is none."""
        kind = field(event, "type")
        if kind == "response.output_text.delta":
            return [_delta(event, kind)]
        if kind in _REASONING:
            return [Reasoning(_delta(event, kind))]
        if kind == "response.refusal.delta":
            return [Refusal(_delta(event, kind))]
        if kind == "response.output_item.added":
            return self._added(field(event, "item"))
        if kind == "response.function_call_arguments.delta":
            call_id, arguments = self._call(event)
            piece = _delta(event, kind)
            arguments.append(piece)
            return [ToolCallDelta(call_id, piece)] if piece else []
        if kind == "response.function_call_arguments.done":
            return self._end(str(field(event, "item_id")), field(event, "arguments"))
        if kind == "response.output_item.done":
            item = field(event, "item")
            if field(item, "type") == "function_call" and field(item, "id") not in self._ended:
                return self._end(str(field(item, "id")), field(item, "arguments"))
            return []
        if kind in ("response.completed", "response.incomplete", "response.failed"):
            return self._ending(kind, field(event, "response"))
        if not isinstance(kind, str) or not kind.startswith("response."):
            raise PartError(f"a Responses stream event needs a type 'response.*', got {_quote(event)}")
        return []

    def close(self) -> list[str | Part]:
        """The parts the stream's end completes: the end of a call still open."""
        return [part for item_id in list(self._calls) for part in self._end(item_id, None)]

    def _added(self, item: Any) -> list[str | Part]:
        if field(item, "type") != "function_call":
            return []
        item_id, call_id, name = field(item, "id"), field(item, "call_id"), field(item, "name")
        if not isinstance(call_id, str) or not isinstance(name, str):
            raise PartError(f"a function_call item needs a call_id and a name, got {_quote(item)}")
        self._calls[str(item_id or call_id)] = (call_id, [])
        self._made_calls = True
        return [ToolCallStart(call_id, name)]

    def _call(self, event: Any) -> tuple[str, list[str]]:
        item_id = str(field(event, "item_id"))
        if item_id not in self._calls:
            raise PartError(f"arguments for the item {item_id!r}, which is no function_call started: {_quote(event)}")
        return self._calls[item_id]

    def _end(self, item_id: str, arguments: object) -> list[str | Part]:
        if item_id not in self._calls:
            return []                         # ended already (arguments.done, then the item's done)
        call_id, pieces = self._calls.pop(item_id)
        self._ended.add(item_id)
        text = arguments if isinstance(arguments, str) else "".join(pieces)
        try:
            return [ToolCallEnd(call_id, json.loads(text) if text.strip() else {})]
        except ValueError:
            raise PartError(f"the function call {call_id!r} ended with arguments that are not JSON: "
                            f"{text[:_QUOTE_CHARS]!r}") from None

    def _ending(self, kind: str, response: Any) -> list[str | Part]:
        parts: list[str | Part] = [part for item_id in list(self._calls) for part in self._end(item_id, None)]
        usage = field(response, "usage")
        if usage is not None:
            parts.append(Usage(_count(usage, "input_tokens"), _count(usage, "output_tokens"),
                               _count(usage, "reasoning_tokens", "output_tokens_details"),
                               _count(usage, "cached_tokens", "input_tokens_details")))
        if kind == "response.failed":
            reason = "error"
        elif kind == "response.incomplete":
            why = field(field(response, "incomplete_details"), "reason") if response is not None else None
            reason = "content_filter" if why == "content_filter" else "length"
        else:
            reason = "tool_calls" if self._made_calls else "stop"
        parts.append(Finish(reason))
        return parts
