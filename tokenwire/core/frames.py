"""The frames a tokenwire stream sends: ``open``, one ``token`` per token, then ``done`` or ``failed``.

A typed part (``tokenwire.core.parts``: reasoning, a tool call's pieces, ...)
is one frame too, with its index as its id, an event named after its kind
and the part's JSON as data; text stays ``event: token`` with the text as data.

How this works: the first frame of every connection carries ``retry`` (how
long an ``EventSource`` waits before it reconnects) and an ``open`` event
whose JSON says which stream this is and where the connection starts: one
frame with data, so no decoder dispatches a ``retry`` of its own as an empty
event.  Each token frame has ``id: <index>``, which is the whole reason a
resume can work: the reader can name exactly how far it got.  ``done``
carries the last index as its id, so a reconnect after it asks for nothing
more; ``failed`` (a model that raised) does too.  No event is named
``error``: a browser's ``EventSource`` fires its own ``error`` on every
dropped connection, and a listener could not tell the two apart.

A silent stream sends ``HEARTBEAT``, one comment line with no blank line
after it: it keeps proxies from timing the connection out, and it joins the
next frame's block, where every decoder ignores it (a comment followed by a
blank line is an empty event to httpx-sse and the openai SDK once an id is
set).  It is only ever sent between two frames, never inside one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import NamedTuple, cast

from .parts import PART_MARK, decode
from .sse import encode, encode_comment

__all__ = ["DEFAULT_RETRY_MS", "HEARTBEAT", "TOKEN_MARK", "TokenItem", "done_frame", "entry_frame", "failed_frame",
           "new_item", "open_frame", "token_frame"]

# How a wire tells a token frame from the others (``TOKEN_MARK in frame``):
# its event line, which always follows its id line.  A data line always
# starts with "data:" (the encoder splits data at every line break), so
# this cannot be forged.
TOKEN_MARK = b"\nevent: token\n"

# What a silent stream sends every heartbeat period (see the module's docstring).
HEARTBEAT = encode_comment("ping")


class TokenItem(NamedTuple):
    """One generated token: its stream index and its text (a named tuple: one is made per token, and this is the
    cheapest immutable record to make, a third of a frozen dataclass's cost)."""

    index: int  # type: ignore[assignment]  # shadows tuple.index, on purpose: it is the token index
    text: str


# ``TokenItem(index, text)`` made from the pair, as the tuple it is: the named tuple's own ``__new__`` is a Python
# function, and the per-token paths (``Steps.make``, a log's landed token) make one for every token.
new_item = cast(Callable[[tuple[int, str]], TokenItem], partial(tuple.__new__, TokenItem))


# What the page shows: short enough that a dropped connection is back within
# a second, long enough not to hammer a server that is restarting.
DEFAULT_RETRY_MS = 750


def open_frame(stream_id: str, *, resumed: bool, start_index: int, policy: str, buffer: int,
               retry_ms: int = DEFAULT_RETRY_MS) -> bytes:
    """Return the first frame of a connection (``retry`` plus an ``open`` event)."""
    body = {"stream_id": stream_id, "resumed": resumed, "start_index": start_index,
            "policy": policy, "buffer": buffer}
    return encode(json.dumps(body), event="open", retry=retry_ms)


def token_frame(item: TokenItem) -> bytes:
    """Return the frame for one token: ``id: <index>``, ``event: token``, the text as data."""
    return encode(item.text, event="token", id=str(item.index))


def entry_frame(item: TokenItem) -> bytes:
    """Return the frame for one log entry: a token's for text, else an event named after the part's kind
    (``reasoning``, ``tool-call-start``, ...; never ``error``) whose data is the part's JSON."""
    index, entry = item
    if "\n" not in entry and "\r" not in entry and entry[:1] != PART_MARK:     # one token per frame: encode's own
        return f"id: {index}\nevent: token\ndata: {entry}\n\n".encode()     # fast path, without its call
    if entry[:1] != PART_MARK:
        return encode(entry, event="token", id=str(index))
    part = decode(entry)
    if isinstance(part, str):                 # a text that began with the mark itself
        return encode(part, event="token", id=str(index))
    return encode(entry[1:], event=part.kind, id=str(index))


def done_frame(total: int, *, delivered_from: int, dropped: int, reason: str | None = None) -> bytes:
    """Return the closing frame; its id is the last index of the answer (none for an empty one).

    ``reason``: the stream ended early, after ``total`` tokens (``"stopped_early": true`` and the reason).
    """
    body: dict[str, object] = {"tokens": total, "delivered_from": delivered_from, "dropped": dropped}
    if reason is not None:
        body.update(stopped_early=True, reason=reason)
    return encode(json.dumps(body), event="done", id=str(total - 1) if total else None)


def failed_frame(message: str, total: int) -> bytes:
    """Return the closing frame of a model that failed after ``total`` tokens: ``failed``, ``{"error", "tokens"}``.

    Its id is the last index logged (none for a model that failed before its first token).
    """
    return encode(json.dumps({"error": message, "tokens": total}), event="failed",
                  id=str(total - 1) if total else None)
