"""The AI SDK's UI message stream: a tokenwire stream rendered as the chunks ``useChat`` and its transports read.

How this works: a stream is indexed log entries (text, or a typed part:
``core.parts``) plus an ending; this rendering puts it on the wire as the
SDK's chunks, each a ``data:`` line of JSON.  A connection's ``ChatFrames``
is a small state machine: it opens with ``start`` (the ``messageId``) and
``start-step``, and turns each entry into zero, one or several chunks:

- text (and a refusal: words the user reads) opens a text block when none
  is open (``text-start``, after ``reasoning-end`` if reasoning was open),
  then is one ``text-delta``; reasoning likewise (``reasoning-start``,
  ``reasoning-delta``, closing an open text block with ``text-end``);
- a tool call's start closes the open block and is ``tool-input-start``,
  its argument deltas ``tool-input-delta``, its end
  ``tool-input-available`` with the parsed input; a tool's result is
  ``tool-output-available`` (or ``tool-output-error``);
- a source is ``source-url`` or ``source-document``, a file ``file``, a data
  part ``data-<name>``; a step closes the open block and is
  ``finish-step`` then ``start-step``; usage and the finish reason put no
  chunk out and are kept for the end.

The end closes the open block, adds the SDK's ``error`` chunk for a model
that failed (naming the failure, never its message or traceback), then
``finish-step`` and ``finish``, whose ``finishReason`` is the real one (the
model's ``Finish``, else ``stop``; ``error`` for a failed model; ``other``
for a stream stopped early, so ``WorkflowChatTransport`` stops coming back)
with the model's usage in ``messageMetadata``, and ``data: [DONE]`` (which
the SDK's parser skips, so it has no number).

Chunks are numbered from 0 and each chunk's SSE ``id`` is its number, so a
``Last-Event-ID`` and the workflow transport's ``startIndex`` (how many
chunks it has read) name the same place.  A chunk's number is its position
in the sequence the whole log makes, so it is the same on every replay and
every instance.  A text-only stream is numbered as it always was: ``start``
0, ``start-step`` 1, ``text-start`` 2, token ``i`` is chunk ``3 + i``.  The
machine keeps ``offset``, the number of the next entry's first chunk minus
its index, so a text-delta is one addition and one ``json.dumps``.

A reader resuming at chunk ``n`` (``ChatFrames(n)``): the entries it has
whole are fed to the machine silently (``skip``, from the log's prefix),
the writer's cursor is the last of them, and every chunk numbered below
``n`` is left out: of the preamble, of the first entry (a reader may stop
inside one entry's several chunks) and of the ending.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..core import parts
from ..core.endings import EarlyEnd
from ..core.frames import TokenItem
from ..core.parts import PART_MARK
from ..core.rendering import Rendered

__all__ = ["DONE", "OPENING", "PREAMBLE", "UI_STREAM_HEADERS", "ChatFrames", "chunk_count", "finish_reason",
           "message_id"]

# The headers that say "a UI message stream" (``useChat`` checks none of them, other readers do).
UI_STREAM_HEADERS = (("x-vercel-ai-ui-message-stream", "v1"),)
# Chunks every message opens with: start, start-step.
OPENING = 2
# Chunks before a text-only stream's first token: start, start-step, text-start (token i is chunk PREAMBLE + i).
PREAMBLE = 3
# The end marker the SDK's own servers send after the last chunk.
DONE = b"data: [DONE]\n\n"
# The SDK's finishReason for each of tokenwire's (its enum spells two of them with a hyphen).
_SDK_REASONS = {"stop": "stop", "length": "length", "tool_calls": "tool-calls", "content_filter": "content-filter",
                "error": "error", "other": "other"}
# Chunk number for "no reader start is this far": a counting machine leaves no chunk out and stops at none.
_NEVER = sys.maxsize


def message_id(stream_id: str) -> str:
    """The assistant message's id: the stream's, so every replay and every instance sends the same ``start``."""
    return f"msg-{stream_id}"


def _chunk(number: int, body: dict[str, Any]) -> bytes:
    return f"id: {number}\ndata: {json.dumps(body, separators=(',', ':'))}\n\n".encode()


def _delta_head(block_id: str) -> bytes:
    return b'data: {"type":"text-delta","id":' + json.dumps(block_id).encode() + b',"delta":'


def finish_reason(ending: EarlyEnd | None, finish: str | None) -> str:
    """The ``finish`` chunk's reason: ``error`` for a failed model, ``other`` for an early end, else the model's
    own (``finish``, tokenwire's name) in the SDK's words, ``stop`` when it gave none."""
    if ending is not None:
        return "error" if ending.error is not None else "other"
    return _SDK_REASONS[finish or "stop"]


def _usage(usage: parts.Usage) -> dict[str, int]:
    """Usage as the SDK's ``LanguageModelUsage`` names it."""
    return {"inputTokens": usage.input_tokens, "outputTokens": usage.output_tokens,
            "totalTokens": usage.total_tokens, "reasoningTokens": usage.reasoning_tokens,
            "cachedInputTokens": usage.cached_input_tokens}


def _source(part: parts.Source) -> dict[str, Any]:
    if part.url is not None:
        body: dict[str, Any] = {"type": "source-url", "sourceId": part.source_id, "url": part.url}
        return body if part.title is None else {**body, "title": part.title}
    body = {"type": "source-document", "sourceId": part.source_id, "mediaType": part.media_type,
            "title": part.title}
    return body if part.filename is None else {**body, "filename": part.filename}


def _data(part: parts.Data) -> dict[str, Any]:
    body: dict[str, Any] = {"type": f"data-{part.name}", "data": part.data}
    return body if part.data_id is None else {**body, "id": part.data_id}


def _result(part: parts.ToolResult) -> dict[str, Any]:
    if part.error is not None:
        return {"type": "tool-output-error", "toolCallId": part.call_id, "errorText": part.error}
    return {"type": "tool-output-available", "toolCallId": part.call_id, "output": part.output}


@dataclass(slots=True)
class _Message:
    """What the chunks so far left open or said: the open block (``"text"``, ``"reasoning"`` or None) and its
    id, how many blocks of each kind were opened, the tool calls started (id -> tool name), usage and finish."""

    block: str | None = None
    block_id: str = ""
    opened: dict[str, int] = field(default_factory=lambda: {"text": 0, "reasoning": 0})
    calls: dict[str, str] = field(default_factory=dict)
    usage: parts.Usage | None = None
    finish: str | None = None

    def copy(self) -> _Message:
        return replace(self, opened=dict(self.opened), calls=dict(self.calls))

    def close(self) -> list[dict[str, Any]]:
        """The chunk that ends the open block (none if none is open)."""
        if self.block is None:
            return []
        kind, self.block = self.block, None
        return [{"type": f"{kind}-end", "id": self.block_id}]

    def open(self, kind: str) -> list[dict[str, Any]]:
        """The chunks that make a ``kind`` block the open one (none if it is already)."""
        if self.block == kind:
            return []
        chunks = self.close()
        self.block, self.block_id = kind, f"{kind}-{self.opened[kind]}"
        self.opened[kind] += 1
        return [*chunks, {"type": f"{kind}-start", "id": self.block_id}]

    def chunks(self, part: str | parts.Part) -> list[dict[str, Any]]:
        """The chunks of one entry, ``part`` decoded; the state moves past it."""
        if isinstance(part, str | parts.Refusal):
            text = part if isinstance(part, str) else part.text
            return [*self.open("text"), {"type": "text-delta", "id": self.block_id, "delta": text}]
        if isinstance(part, parts.Reasoning):
            return [*self.open("reasoning"), {"type": "reasoning-delta", "id": self.block_id, "delta": part.text}]
        return self._tool_chunks(part) if part.kind.startswith("tool") else self._other_chunks(part)

    def _tool_chunks(self, part: parts.Part) -> list[dict[str, Any]]:
        if isinstance(part, parts.ToolCallStart):
            self.calls[part.call_id] = part.name
            return [*self.close(), {"type": "tool-input-start", "toolCallId": part.call_id, "toolName": part.name}]
        if isinstance(part, parts.ToolCallDelta):
            return [{"type": "tool-input-delta", "toolCallId": part.call_id, "inputTextDelta": part.arguments}]
        if isinstance(part, parts.ToolCallEnd):
            return [{"type": "tool-input-available", "toolCallId": part.call_id,
                     "toolName": self.calls.get(part.call_id, ""), "input": part.input}]
        assert isinstance(part, parts.ToolResult)
        return [_result(part)]

    def _other_chunks(self, part: parts.Part) -> list[dict[str, Any]]:
        if isinstance(part, parts.Step):
            return [*self.close(), {"type": "finish-step"}, {"type": "start-step"}]
        if isinstance(part, parts.Usage):
            self.usage = part
        elif isinstance(part, parts.Finish):
            self.finish = part.reason
        elif isinstance(part, parts.Source):
            return [_source(part)]
        elif isinstance(part, parts.File):
            return [{"type": "file", "url": part.url, "mediaType": part.media_type}]
        elif isinstance(part, parts.Data):
            return [_data(part)]
        return []

    def ending(self, ending: EarlyEnd | None) -> list[dict[str, Any]]:
        """The chunks after the last entry (the state is left as it is: a count may ask, then the writer)."""
        chunks: list[dict[str, Any]] = [] if self.block is None else [{"type": f"{self.block}-end",
                                                                       "id": self.block_id}]
        if ending is not None and ending.error is not None:
            chunks.append({"type": "error", "errorText": ending.error})
        finish: dict[str, Any] = {"type": "finish", "finishReason": finish_reason(ending, self.finish)}
        if self.usage is not None:
            finish["messageMetadata"] = {"usage": _usage(self.usage)}
        return [*chunks, {"type": "finish-step"}, finish]

    def ending_count(self, failed: bool) -> int:
        return int(self.block is not None) + int(failed) + 2


class ChatFrames:
    """The ``Rendering`` of one connection that starts at chunk ``start`` (0: the whole message); see the module.

    ``message_id``: the id ``start`` gives the message when the answer goes on with one the chat holds (the
    assistant's, with the client's tool outputs: ``useChat`` adds to it); None: ``msg-<stream id>``.
    """

    __slots__ = ("_head", "_message", "_offset", "message_id", "start")

    def __init__(self, start: int = 0, message_id: str | None = None) -> None:
        if isinstance(start, bool) or not isinstance(start, int) or start < 0:
            raise ValueError(f"start must be a chunk number >= 0, got {start!r}")
        self.start, self.message_id = start, message_id      # message_id: start's (None: the stream's own)
        self._offset = OPENING          # entry i's first chunk is chunk i + _offset
        self._head = b""                # the open text block's text-delta head (b"": no text block is open)
        self._message = _Message()

    def opening(self, stream: Rendered, cursor: int) -> bytes:
        """The opening chunks from ``start`` on; the first carries the stream's ``retry`` (a field in a block
        with data: an SSE reader takes it, and a decoder that makes an event of a block with only ``retry`` has
        none to make)."""
        chunks = [{"type": "start", "messageId": self.message_id or message_id(stream.stream_id)},
                  {"type": "start-step"}]
        opened = b"".join(_chunk(n, chunks[n]) for n in range(self.start, OPENING))
        return b"retry: %d\n%s" % (stream.retry_ms, opened) if opened else b""

    def token(self, item: TokenItem) -> bytes:
        text = item.text
        if text[:1] != PART_MARK and self._head:           # text in an open text block: one text-delta
            return b"id: %d\n%s%s}\n\n" % (item.index + self._offset, self._head, json.dumps(text).encode())
        first = item.index + self._offset
        chunks = self._entry(text)
        return b"".join(_chunk(n, chunk) for n, chunk in enumerate(chunks, first) if n >= self.start)

    def _entry(self, entry: str) -> list[dict[str, Any]]:
        message = self._message
        chunks = message.chunks(parts.decode(entry))
        self._offset += len(chunks) - 1
        self._head = _delta_head(message.block_id) if message.block == "text" else b""
        return chunks

    def closing(self, stream: Rendered, delivered_from: int, dropped: int) -> bytes:
        first = stream.total + self._offset
        chunks = self._message.ending(stream.ending)
        return b"".join(_chunk(n, chunk) for n, chunk in enumerate(chunks, first) if n >= self.start) + DONE

    # -- resume ---------------------------------------------------------------------------------
    def skip(self, entries: Iterable[str], first: int) -> int:
        """Feed silently the entries (indexed from ``first``, the index after those fed so far) whose chunks are
        all numbered below ``start``; the index of the first that has one numbered ``start`` or later (the
        writer's cursor is the index before it), or the index after the last if all were fed."""
        index = first
        for entry in entries:
            if entry[:1] != PART_MARK and self._head:
                if index + self._offset >= self.start:
                    return index
            else:
                kept, number = (self._offset, self._head, self._message.copy()), index + self._offset
                if number + len(self._entry(entry)) - 1 >= self.start:        # its last chunk is wanted
                    self._offset, self._head, self._message = kept
                    return index
            index += 1
        return index

    def wanted(self, fed: int) -> int:
        """How many entries to read after the ``fed`` first to reach ``start`` if each puts out one chunk."""
        return max(1, self.start - fed - self._offset)

    def count(self, fed: int, ended: bool, failed: bool) -> int:
        """How many chunks there are once ``fed`` entries (the whole log so far) were fed, plus the ending's
        once ``ended`` (``failed``: with the error chunk)."""
        return fed + self._offset + (self._message.ending_count(failed) if ended else 0)


def chunk_count(entries: Sequence[str], ended: bool, failed: bool) -> int:
    """How many chunks a stream whose log holds ``entries`` has (with the ending's once ``ended``)."""
    counting = ChatFrames(_NEVER)
    fed = counting.skip(entries, 0)
    return counting.count(fed, ended, failed)
