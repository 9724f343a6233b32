"""The effects a process yields, and the items that travel through a channel.

How this works: producer, writer and client are generators written once.
They never sleep, block or touch a socket themselves; they yield one of these
requests and a driver performs it (virtual clock, real threads, or a socket
server) and sends the result back in.  What each effect returns to the
process is written next to it.  Effects are plain (not frozen) slotted
dataclasses: one is made per step on the hot path, nothing keeps them, and a
frozen one costs three times as much to build.  ``TokenItem`` travels and is
kept, so it is frozen.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .channel import BoundedChannel
    from .stream import Stream

__all__ = ["Effect", "Get", "Process", "Put", "Send", "Sleep", "Spawn", "TokenItem", "TIMEOUT"]


@dataclass(frozen=True, slots=True)
class TokenItem:
    """One generated token: its stream index and its text."""

    index: int
    text: str


@dataclass(slots=True)
class Sleep:
    """Let ``ns`` nanoseconds pass (the driver paces by deadline). Returns None."""

    ns: int


@dataclass(slots=True)
class Put:
    """Offer ``item`` to ``stream``'s current channel, waiting while a ``block`` channel is full.

    Returns the final ``Outcome``.
    """

    stream: Stream
    item: TokenItem


@dataclass(slots=True)
class Get:
    """Take from ``channel`` (one of ``stream``'s), waiting while it is empty.

    Returns a ``TokenItem`` or a ``Taken`` reason; ``TIMEOUT`` if ``timeout_ns``
    passed with nothing to take (real-time drivers only).
    """

    stream: Stream
    channel: BoundedChannel[TokenItem]
    timeout_ns: int | None = None


@dataclass(slots=True)
class Send:
    """Write ``frame`` to the wire of the process that yields it. Returns True, or False when the peer is gone."""

    frame: bytes


@dataclass(slots=True)
class Spawn:
    """Start ``process`` alongside the caller. Returns None."""

    process: Process


class _Timeout:
    def __repr__(self) -> str:
        return "TIMEOUT"


TIMEOUT: Any = _Timeout()

Effect = Sleep | Put | Get | Send | Spawn
Process = Generator[Effect, Any, Any]
