"""The frames a tokenwire stream sends: ``open``, one ``token`` per token, ``done``.

How this works: the first frame of every connection carries ``retry`` (how
long an ``EventSource`` waits before it reconnects) and an ``open`` event
whose JSON says which stream this is and where the connection starts.  Each
token frame has ``id: <index>``, which is the whole reason a resume can work:
the reader can name exactly how far it got.  ``done`` carries the last index
as its id, so a reconnect after it asks for nothing more.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from .sse import encode

__all__ = ["DEFAULT_RETRY_MS", "TOKEN_MARK", "TokenItem", "done_frame", "open_frame", "token_frame"]

# How a wire tells a token frame from the others (``TOKEN_MARK in frame``):
# its event line, which always follows its id line.  A data line always
# starts with "data:" (the encoder splits data at every line break), so
# this cannot be forged.
TOKEN_MARK = b"\nevent: token\n"


@dataclass(frozen=True, slots=True)
class TokenItem:
    """One generated token: its stream index and its text."""

    index: int
    text: str


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


def done_frame(total: int, *, delivered_from: int, dropped: int) -> bytes:
    """Return the closing frame; its id is the last index of the answer."""
    body = {"tokens": total, "delivered_from": delivered_from, "dropped": dropped}
    return encode(json.dumps(body), event="done", id=str(total - 1))
