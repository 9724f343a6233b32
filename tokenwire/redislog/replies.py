"""What the Redis token log's scripts answer (``scripts``), read: a value, or the core's ``LogError``.

How this works: each function takes one script's reply for one stream and
returns what it means for ``AsyncRedisLog``, the one implementation
(``RedisTokenLog`` runs its coroutines), or raises the core's error naming
the stream; ``entry_id``/``entry_index`` turn a token's index into its
entry id under an epoch and back (see ``scripts``).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..core.tokenlog import IndexConflict, LeaseLost, LogGap, StreamLost, StreamStopped, UnknownStream

__all__ = ["Claim", "appended", "claimed", "create_args", "created", "entry_id", "entry_index", "tokens_read"]


@dataclass(frozen=True, slots=True)
class Claim:
    """The answer to a lease claim: ``owned`` (this instance may generate), the log's ``length``, the ``owner``,
    when owned, the ``epoch`` its appends are fenced by, and whether the stream was ``stopped`` for good."""

    owned: bool
    length: int
    owner: str
    epoch: int = 0
    stopped: bool = False


# A stream's length (the next index) is its last entry's sequence number, ``e-<length>``: no counter is
# written per token.
def create_args(meta: Mapping[str, Any], total: int, ttl_ms: int, owner_id: str) -> list[Any]:
    """The create script's arguments; a fresh creator token per call, so a retry of this call is recognised."""
    if isinstance(total, bool) or not isinstance(total, int) or total < 0:
        raise ValueError(f"total must be a non-negative int, got {total!r}")
    return [json.dumps(dict(meta)), total, ttl_ms, f"{owner_id}/{secrets.token_hex(6)}"]


def created(stream_id: str, made: Any) -> None:
    if not made:
        raise ValueError(f"stream {stream_id!r} already exists")


def appended(stream_id: str, index: int, status: str, value: Any) -> None:
    if status == "ok":
        return
    if status == "lease":
        raise LeaseLost(stream_id, str(value))
    if status == "conflict":
        raise IndexConflict(stream_id, index, int(value))
    if status == "lost":
        raise StreamLost(stream_id)
    if status == "stopped":
        raise StreamStopped(stream_id)
    raise UnknownStream(stream_id)


def tokens_read(stream_id: str, cursor: int, replies: list[Any]) -> list[str]:
    """The tokens of a read's replies (length, first kept entry, the range asked for; ``READ``'s reply)."""
    length, first, *rest = replies
    if length is None or length is False:       # a script's false: nil in RESP2, false in RESP3
        raise UnknownStream(stream_id)
    if int(length) < 0:
        raise StreamLost(stream_id)
    first_kept = entry_index(first[0][0]) if first else int(length)
    if cursor + 1 < first_kept:
        raise LogGap(stream_id, cursor, first_kept)
    return [_text(fields) for _, fields in rest[0]] if rest else []


def _text(fields: Any) -> str:
    """An entry's token: its ``t`` field (a dict from redis-py, a flat list from a script: ``t`` comes first)."""
    return str(fields["t"] if isinstance(fields, dict) else fields[1])


def claimed(stream_id: str, reply: Any) -> Claim:
    owned, length, owner, epoch = reply
    if owned == -1:
        raise UnknownStream(stream_id)
    if owned == -2:
        raise StreamLost(stream_id)
    return Claim(owned == 1, int(length), str(owner), int(epoch), stopped=owned == -3)


def entry_index(entry_id: str) -> int:
    """The token index of a stream entry id (``e-(i+1)`` is token ``i``, whatever the epoch ``e``)."""
    return int(entry_id.partition("-")[2]) - 1


def entry_id(epoch: int, index: int) -> bytes:
    """The entry id of token ``index`` appended in ``epoch``, as the ``XADD`` sends it."""
    return b"%d-%d" % (epoch, index + 1)
