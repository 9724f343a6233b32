"""OpenAI's Responses: a tokenwire stream rendered as numbered Responses events, or as a ``response`` object.

How this works: ``ResponseEvents`` is a small state machine.  Fed the
log's entries in order, it yields each entry's events (none, one or
several), and an event's ``sequence_number`` is its place in the whole
sequence: ``response.created`` (0) and ``response.in_progress`` (1), then
each entry's events, then the ending's.  So the numbers are a function of
the log, the same on every replay and every instance.  The output items
come in order, each with its ``output_index``:

- text opens a ``message`` item (``output_item.added``,
  ``content_part.added`` of an ``output_text``), then is one
  ``output_text.delta``: a text-only stream keeps its numbers (created 0,
  in_progress 1, output_item.added 2, content_part.added 3, text entry i is
  ``4 + i``), and a plain ``str`` entry in an open text part is the fast path;
- a refusal is a ``refusal`` content part of the message (``refusal.delta``);
- reasoning opens a ``reasoning`` item whose ``reasoning_text`` part grows by
  ``reasoning_text.delta`` (what the SDK's ``ResponseStreamEvent`` parses);
- a tool call is a ``function_call`` item: ``output_item.added`` at its
  start, one ``function_call_arguments.delta`` per argument delta (its
  arguments whole in one if it sent none), ``function_call_arguments.done``
  and ``output_item.done`` at its end;
- a step closes the open item, so the next text is a new message; usage and
  the finish are kept for the end; results, sources, files and data have no
  event (they are not output items of a response).

An item closes (``*.done``, ``content_part.done``, ``output_item.done``)
when another kind of item starts, at a step, or at the end, which then
sends ``response.completed`` with every output item and the usage,
``response.failed`` (a model that failed) or ``response.incomplete``
(stopped early: status ``cancelled`` when it was stopped, ``incomplete``
otherwise; also a ``Finish`` of ``length`` or ``content_filter``).

A reader resumed after event ``n`` (``starting_after``) gets ``resume``'s
rendering: the log's entries are fed to a fresh machine silently until its
numbers pass ``n``; the writer's cursor is the last entry fed, and the
events of that entry the reader lacks are sent first.  A reader whose
writer skips entries (a drop policy) sees each skipped one counted as one
event, exact for a text stream.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Any

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
from .openai_response import response_object, response_status, usage_of
from .openai_wire import Answered, compact_json
from .params import PastTheEnd, RequestError

__all__ = ["OPENING", "ResponseEvents", "Resumed", "resume", "whole_response"]

# Events before the first entry's: response.created and response.in_progress.
OPENING = 2
# A finish reason that leaves a response incomplete, and the reason its ``incomplete_details`` give.
_INCOMPLETE = {"length": "max_output_tokens", "content_filter": "content_filter"}
# A content part's kind -> its events' prefix and the field holding its text.
_PARTS = {"output_text": ("response.output_text", "text"), "refusal": ("response.refusal", "refusal"),
          "reasoning_text": ("response.reasoning_text", "text")}
# Event numbers no reader has asked after: the machine feeds entries silently (``whole_response``).
_SILENT = sys.maxsize


def _part_body(kind: str, text: str) -> dict[str, Any]:
    if kind == "output_text":
        return {"type": kind, "text": text, "annotations": [], "logprobs": []}
    return {"type": kind, _PARTS[kind][1]: text}


def _event(kind: str, number: int, body: dict[str, Any]) -> bytes:
    return f"event: {kind}\ndata: {compact_json({'type': kind, 'sequence_number': number, **body})}\n\n".encode()


@dataclass(slots=True)
class _Block:
    """The message or reasoning item open now: its output index, its dict, and its content part open now."""

    index: int
    item: dict[str, Any]
    part: str | None = None                          # the open part's kind (a key of _PARTS)
    where: dict[str, Any] = field(default_factory=dict)
    pieces: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Call:
    """A function call item whose arguments are still coming."""

    index: int
    item: dict[str, Any]
    pieces: list[str] = field(default_factory=list)


@dataclass(slots=True)
class ResponseEvents:
    """The ``Rendering`` of one connection to a response's events after event ``starting_after`` (-1: all)."""

    answered: Answered
    background: bool
    starting_after: int = -1
    _number: int = field(init=False, default=OPENING)              # the next event's, inside an entry's events
    _offset: int = field(init=False, default=OPENING)              # the next entry's first event - its index
    _texts: list[str] | None = field(init=False, default=None)     # the open output_text part's pieces
    _output: list[dict[str, Any]] = field(init=False, default_factory=list)
    _block: _Block | None = field(init=False, default=None)
    _calls: dict[str, _Call] = field(init=False, default_factory=dict)
    _usage: Usage | None = field(init=False, default=None)
    _finish: str | None = field(init=False, default=None)
    _pending: bytes = field(init=False, default=b"")               # a resumed reader's first events
    _delta_head: bytes = field(init=False, default=b"")

    def __post_init__(self) -> None:
        if isinstance(self.starting_after, bool) or not isinstance(self.starting_after, int) \
                or self.starting_after < -1:
            raise ValueError(f"starting_after must be an event number >= -1, got {self.starting_after!r}")

    # -- the Rendering ----------------------------------------------------------------------
    def opening(self, stream: Rendered, cursor: int) -> bytes:
        first = "queued" if self.background else "in_progress"
        events = [("response.created", first), ("response.in_progress", "in_progress")]
        return b"".join(_event(kind, n, {"response": response_object(self.answered, status,
                                                                     background=self.background)})
                        for n, (kind, status) in enumerate(events) if n > self.starting_after) + self._pending

    def token(self, item: TokenItem) -> bytes:
        """An entry's events.  The fast path, a text in an open text part, is one delta numbered
        ``_offset + index``: one event for one entry leaves ``_offset`` as it is (and an entry a drop
        policy skipped counts one event)."""
        entry, texts = item.text, self._texts
        if entry[:1] != PART_MARK and texts is not None:
            texts.append(entry)
            number = self._offset + item.index
            if number <= self.starting_after:
                return b""
            return b"%s%d,\"delta\":%s}\n\n" % (self._delta_head, number, json.dumps(entry).encode())
        self._number = self._offset + item.index
        out = self._entry(decode(entry) if entry[:1] == PART_MARK else entry)
        self._offset = self._number - item.index - 1
        return out

    def closing(self, stream: Rendered, delivered_from: int, dropped: int) -> bytes:
        ending = stream.ending
        out = self.close_items(stream.total)
        response = self.response(response_status(ending, True), stream.total, ending.error if ending else None)
        last = {"completed": "response.completed", "failed": "response.failed"}.get(response["status"],
                                                                                    "response.incomplete")
        return out + self._emit(last, {"response": response})

    # -- what the whole response says --------------------------------------------------------
    def response(self, status: str, total: int, error: str | None = None) -> dict[str, Any]:
        """The response object now: every output item (an open one with its text so far) and, once it ended, its
        usage; a ``completed`` one is ``incomplete`` after a ``Finish`` of length or content filter."""
        self._materialize()
        incomplete = _INCOMPLETE.get(self._finish or "") if status == "completed" else None
        usage = None if status == "in_progress" else usage_of(total, self._usage)
        return response_object(self.answered, "incomplete" if incomplete else status, background=self.background,
                               output=self._output, usage=usage, error=error, incomplete=incomplete)

    def _materialize(self) -> None:
        block = self._block
        if block is not None and block.part is not None:
            block.item["content"][-1] = _part_body(block.part, "".join(block.pieces))
        for call in self._calls.values():
            call.item["arguments"] = "".join(call.pieces)

    def skip_to(self, entries: list[str]) -> int:
        """Feed ``entries`` until the events pass ``starting_after``; how many were fed.  The fed entries' events
        after ``starting_after`` (the last one's, in part) are sent at the opening."""
        fed, pending = 0, []
        for entry in entries:
            if self._offset + fed > self.starting_after:
                break
            pending.append(self.token(TokenItem(fed, entry)))
            fed += 1
        self._pending = b"".join(pending)
        self._number = self._offset + fed
        return fed

    def count(self, ended: bool) -> int:
        """How many events there are after the entries ``skip_to`` fed: with the end's (``close_items``' and the
        last), once ``ended``."""
        if not ended:
            return self._number
        block = self._block
        count = 0 if self._output else 5             # an empty message: added, part added, done, part done, done
        if block is not None:
            count += (2 if block.part is not None else 0) + 1
        return self._number + count + 2 * len(self._calls) + 1

    # -- each entry's events ---------------------------------------------------------------
    def _emit(self, kind: str, body: dict[str, Any]) -> bytes:
        number = self._number
        self._number = number + 1
        return _event(kind, number, body) if number > self.starting_after else b""

    def _entry(self, part: Part | str) -> bytes:
        if isinstance(part, str):
            return self._write("output_text", part)
        if isinstance(part, Refusal | Reasoning):
            return self._write("refusal" if isinstance(part, Refusal) else "reasoning_text", part.text)
        if isinstance(part, ToolCallStart):
            return self._start(part)
        if isinstance(part, ToolCallDelta):
            return self._argue(part.call_id, part.arguments)
        if isinstance(part, ToolCallEnd):
            return self._end(part)
        if isinstance(part, Step):
            return self._close_block()
        if isinstance(part, Usage):
            self._usage = part
        elif isinstance(part, Finish):
            self._finish = part.reason
        return b""

    def _item_id(self, prefix: str, index: int) -> str:
        suffix = self.answered.id.removeprefix("resp_")
        return f"{prefix}_{suffix}" if index == 0 else f"{prefix}_{suffix}_{index}"

    def _write(self, kind: str, text: str) -> bytes:
        """A piece of text, refusal or reasoning: its item and content part opened if need be, then its delta."""
        item_type = "reasoning" if kind == "reasoning_text" else "message"
        out = b""
        block = self._block
        if block is None or block.item["type"] != item_type:
            out += self._close_block() + self._open_block(item_type)
            block = self._block
            assert block is not None
        if block.part != kind:
            out += self._close_part(block) + self._open_part(block, kind)
        block.pieces.append(text)
        number = self._number
        self._number = number + 1
        if number <= self.starting_after:
            return out
        return out + b"%s%d,\"delta\":%s}\n\n" % (self._delta_head, number, json.dumps(text).encode())

    def _open_block(self, item_type: str) -> bytes:
        index = len(self._output)
        if item_type == "message":
            item = {"id": self._item_id("msg", index), "type": "message", "status": "in_progress",
                    "role": "assistant", "content": []}
        else:
            item = {"id": self._item_id("rs", index), "type": "reasoning", "status": "in_progress", "summary": [],
                    "content": []}
        self._output.append(item)
        self._block = _Block(index, item)
        return self._emit("response.output_item.added", {"output_index": index, "item": item})

    def _open_part(self, block: _Block, kind: str) -> bytes:
        content = block.item["content"]
        block.part, block.pieces = kind, []
        self._texts = block.pieces if kind == "output_text" else None
        block.where = {"item_id": block.item["id"], "output_index": block.index, "content_index": len(content)}
        content.append(_part_body(kind, ""))
        prefix = _PARTS[kind][0]
        logprobs = ',"logprobs":[]' if kind == "output_text" else ""
        self._delta_head = (f'event: {prefix}.delta\ndata: {{"type":"{prefix}.delta",{compact_json(block.where)[1:-1]}'
                            f'{logprobs},"sequence_number":').encode()
        return self._emit("response.content_part.added", {**block.where, "part": _part_body(kind, "")})

    def _close_part(self, block: _Block) -> bytes:
        kind = block.part
        if kind is None:
            return b""
        prefix, name = _PARTS[kind]
        text = "".join(block.pieces)
        done: dict[str, Any] = {**block.where, name: text, **({"logprobs": []} if kind == "output_text" else {})}
        block.item["content"][-1] = _part_body(kind, text)
        block.part, block.pieces, self._texts = None, [], None
        return (self._emit(f"{prefix}.done", done)
                + self._emit("response.content_part.done", {**block.where, "part": block.item["content"][-1]}))

    def _close_block(self) -> bytes:
        block = self._block
        if block is None:
            return b""
        out = self._close_part(block)
        block.item["status"] = "completed"
        self._block = None
        return out + self._emit("response.output_item.done", {"output_index": block.index, "item": block.item})

    def close_items(self, total: int) -> bytes:
        """Close every open item after ``total`` entries (an answer with none gets an empty message, as a text-only
        stream always had)."""
        self._number = self._offset + total
        out = b""
        if not self._output:
            out += self._open_block("message")
            block = self._block
            assert block is not None
            out += self._open_part(block, "output_text")
        out += self._close_block()
        for call_id in list(self._calls):
            out += self._finish_call(call_id, "incomplete")
        return out

    def _start(self, part: ToolCallStart) -> bytes:
        out = self._close_block()
        index = len(self._output)
        item = {"id": self._item_id("fc", index), "type": "function_call", "status": "in_progress",
                "call_id": part.call_id, "name": part.name, "arguments": ""}
        self._output.append(item)
        self._calls[part.call_id] = _Call(index, item)
        return out + self._emit("response.output_item.added", {"output_index": index, "item": item})

    def _argue(self, call_id: str, arguments: str) -> bytes:
        call = self._calls.get(call_id)
        if call is None:
            return b""
        call.pieces.append(arguments)
        return self._emit("response.function_call_arguments.delta",
                          {"item_id": call.item["id"], "output_index": call.index, "delta": arguments})

    def _end(self, part: ToolCallEnd) -> bytes:
        call = self._calls.get(part.call_id)
        if call is None:
            return b""
        out = b"" if call.pieces else self._argue(part.call_id, json.dumps(part.input))
        return out + self._finish_call(part.call_id, "completed")

    def _finish_call(self, call_id: str, status: str) -> bytes:
        call = self._calls.pop(call_id)
        item = call.item
        item["arguments"], item["status"] = "".join(call.pieces), status
        return (self._emit("response.function_call_arguments.done",
                           {"item_id": item["id"], "output_index": call.index, "arguments": item["arguments"]})
                + self._emit("response.output_item.done", {"output_index": call.index, "item": item}))


@dataclass(frozen=True, slots=True)
class Resumed:
    """A reader's rendering after event ``starting_after``, and the writer's cursor (the last entry it has)."""

    rendering: ResponseEvents
    cursor: int


def resume(answered: Answered, background: bool, starting_after: int, entries: list[str], ended: bool) -> Resumed:
    """Where a reader who has events ``0..starting_after`` resumes, the log holding ``entries`` (all so far).

    Raises ``RequestError`` 400 for a ``starting_after`` past the events there are (``PastTheEnd`` while the
    response is still generating: on a shared log the log may have gone back past what the reader was sent).
    """
    events = ResponseEvents(answered, background, starting_after)
    fed = events.skip_to(entries)
    if fed == len(entries):
        count = events.count(ended)
        if starting_after >= count:
            message = f"starting_after {starting_after} is past the end: this response has events 0..{count - 1} so far"
            raise RequestError(400, message) if ended else PastTheEnd(message)
    return Resumed(events, fed - 1)


def whole_response(answered: Answered, entries: list[str], status: str, background: bool,
                   error: str | None = None) -> dict[str, Any]:
    """The response object of a response whose log holds ``entries``, ``status`` as the log says it."""
    events = ResponseEvents(answered, background, _SILENT)
    for index, entry in enumerate(entries):
        events.token(TokenItem(index, entry))
    if status != "in_progress":
        events.close_items(len(entries))
    return events.response(status, len(entries), error)
