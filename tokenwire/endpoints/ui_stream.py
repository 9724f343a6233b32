"""The AI SDK's UI message stream: a tokenwire stream rendered as the chunks ``useChat`` and its transports read.

How this works: a stream is indexed tokens plus an ending; this rendering
puts it on the wire as the SDK's chunks, each a ``data:`` line of JSON:
``start`` (with the ``messageId``), ``start-step``, ``text-start``, one
``text-delta`` per token, then ``text-end``, ``finish-step``, ``finish`` and
``data: [DONE]`` (which the SDK's parser skips, so it has no index).  A model
that failed adds the SDK's ``error`` chunk (naming the failure, never its
message or traceback) before ``finish-step``, and its ``finish`` says
``"finishReason": "error"``; a stream stopped early ends with a ``finish`` of
reason ``"other"``, so a reader always sees ``finish`` and
``WorkflowChatTransport`` stops coming back.

The first chunk of a connection that starts in the preamble carries the
stream's ``retry`` (as tokenwire's ``open`` does), so a generic SSE reader
waits as long as the server asks before it comes back; the SDK's
transports come back on their own terms.

Chunks are numbered from 0, and each chunk's SSE ``id`` is its number, so a
``Last-Event-ID`` and the workflow transport's ``startIndex`` (how many
chunks it has read) name the same place.  The arithmetic between chunk and
token numbers is here and only here: token ``i`` is chunk ``PREAMBLE + i``;
a reader starting at chunk ``n`` has tokens ``0..cursor_of(n)`` (the
exclusive cursor the stream's writer takes) and gets the preamble chunks from
``n`` on, the tokens after the cursor, and the ending chunks from ``n`` on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ..core.frames import TokenItem
from ..core.rendering import Rendered

__all__ = ["DONE", "PREAMBLE", "UI_STREAM_HEADERS", "ChatFrames", "chunk_count", "cursor_of", "ending_chunks",
           "finished_chunks", "message_id", "token_chunk"]

# The headers that say "a UI message stream" (``useChat`` checks none of them, other readers do).
UI_STREAM_HEADERS = (("x-vercel-ai-ui-message-stream", "v1"),)
# Chunks before the first token: start, start-step, text-start.
PREAMBLE = 3
# The end marker the SDK's own servers send after the last chunk.
DONE = b"data: [DONE]\n\n"
# The id of the one text part of a message (the SDK's deltas name the part they extend).
TEXT_ID = "text-0"
_DELTA_HEAD = b'data: {"type":"text-delta","id":"' + TEXT_ID.encode() + b'","delta":'
_ERROR_CHUNKS = 4           # text-end, error, finish-step, finish
_PLAIN_CHUNKS = 3           # text-end, finish-step, finish


def message_id(stream_id: str) -> str:
    """The assistant message's id: the stream's, so every replay and every instance sends the same ``start``."""
    return f"msg-{stream_id}"


def cursor_of(start: int) -> int:
    """The exclusive token cursor of a reader that has chunks ``0..start-1`` (-1: no token yet)."""
    return max(-1, start - PREAMBLE - 1)


def token_chunk(index: int) -> int:
    """The chunk number of token ``index``."""
    return PREAMBLE + index


def finished_chunks(total: int, failed: bool) -> int:
    """How many chunks a stream that ended after ``total`` tokens has (``failed``: with the error chunk)."""
    return PREAMBLE + total + (_ERROR_CHUNKS if failed else _PLAIN_CHUNKS)


def chunk_count(generated: int, ended: bool, failed: bool) -> int:
    """Chunks there are so far: the preamble and ``generated`` deltas, plus the ending once ``ended``."""
    return finished_chunks(generated, failed) if ended else PREAMBLE + generated


def _chunk(number: int, body: dict[str, object]) -> bytes:
    return f"id: {number}\ndata: {json.dumps(body, separators=(',', ':'))}\n\n".encode()


def _preamble(stream_id: str) -> list[dict[str, object]]:
    return [{"type": "start", "messageId": message_id(stream_id)}, {"type": "start-step"},
            {"type": "text-start", "id": TEXT_ID}]


def ending_chunks(stream: Rendered) -> list[dict[str, object]]:
    """The chunks after the last token: ``text-end``, the ``error`` of a failed model, ``finish-step``, ``finish``."""
    early = stream.ending
    chunks: list[dict[str, object]] = [{"type": "text-end", "id": TEXT_ID}]
    if early is not None and early.error is not None:
        chunks.append({"type": "error", "errorText": early.error})
    reason = "stop" if early is None else "error" if early.error is not None else "other"
    chunks += [{"type": "finish-step"}, {"type": "finish", "finishReason": reason}]
    return chunks


@dataclass(frozen=True, slots=True)
class ChatFrames:
    """The ``Rendering`` of one connection that starts at chunk ``start`` (0: the whole message)."""

    start: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.start, bool) or not isinstance(self.start, int) or self.start < 0:
            raise ValueError(f"start must be a chunk number >= 0, got {self.start!r}")

    def opening(self, stream: Rendered, cursor: int) -> bytes:
        """The preamble chunks from ``start`` on; the first carries the stream's ``retry`` (a field in a block
        with data: an SSE reader takes it, and a decoder that makes an event of a block with only ``retry`` has
        none to make)."""
        chunks = _preamble(stream.stream_id)
        opened = b"".join(_chunk(n, chunks[n]) for n in range(self.start, PREAMBLE))
        return b"retry: %d\n%s" % (stream.retry_ms, opened) if opened else b""

    def token(self, item: TokenItem) -> bytes:
        return b"id: %d\n%s%s}\n\n" % (PREAMBLE + item.index, _DELTA_HEAD, json.dumps(item.text).encode())

    def closing(self, stream: Rendered, delivered_from: int, dropped: int) -> bytes:
        first = PREAMBLE + stream.total
        frames = [_chunk(n, chunk) for n, chunk in enumerate(ending_chunks(stream), first) if n >= self.start]
        return b"".join(frames) + DONE
