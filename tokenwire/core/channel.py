"""BoundedChannel: the one place where a fast producer meets a slow reader.

How this works: ``offer`` and ``take`` never block; they return what happened
(an ``Outcome``) and leave waiting to the driver that runs the processes, so
the same channel serves the virtual-clock simulation and the event-loop
driver, in memory or over sockets.  ``block`` is therefore not a different queue but a policy
whose ``offer`` answers ``FULL`` and lets the caller wait; the drop policies
answer at once; ``disconnect`` cuts the reader off (as a Mercure hub does)
and the reader resumes from the token log.

Statistics are counted here, where every decision is made, and handed out as
a frozen ``ChannelStats`` snapshot.  Items carry their stream ``index`` so that
runs of consecutive dropped indices ("gap runs") can be counted as they happen.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from enum import StrEnum
from typing import Generic, Protocol, TypeVar

__all__ = [
    "MAX_CAPACITY",
    "BoundedChannel",
    "ChannelStats",
    "Outcome",
    "Policy",
    "Taken",
    "check_capacity",
    "parse_policy",
]

# Far above any useful buffer for one stream (the page allows 1..64); a bound
# keeps a typo such as capacity=10**9 from becoming a memory promise.
MAX_CAPACITY = 1 << 16


class Policy(StrEnum):
    """What a full channel does with the next offer."""

    BLOCK = "block"
    DROP_NEWEST = "drop-newest"
    DROP_OLDEST = "drop-oldest"
    DISCONNECT = "disconnect"


POLICY_NAMES = tuple(p.value for p in Policy)


def parse_policy(value: object) -> Policy:
    """Return the ``Policy`` named by ``value``; raises ``ValueError`` listing the valid names."""
    if isinstance(value, Policy):
        return value
    try:
        return Policy(value)  # type: ignore[arg-type]
    except ValueError:
        raise ValueError(
            f"policy must be one of {', '.join(POLICY_NAMES)}, got {value!r}"
        ) from None


def check_capacity(capacity: object) -> int:
    """Return ``capacity`` if it is an int in 1..MAX_CAPACITY; raises ``ValueError`` naming it."""
    if isinstance(capacity, bool) or not isinstance(capacity, int) or not 1 <= capacity <= MAX_CAPACITY:
        raise ValueError(f"capacity must be an int from 1 to {MAX_CAPACITY}, got {capacity!r}")
    return capacity


class Outcome(StrEnum):
    """What ``offer`` did with an item."""

    ACCEPTED = "accepted"      # queued
    EVICTED = "evicted"        # queued, after evicting the oldest queued item (drop-oldest)
    DROPPED = "dropped"        # discarded, the channel was full (drop-newest)
    FULL = "full"              # not queued; the caller should wait and offer again (block)
    CUT = "cut"                # the reader was cut off by this offer (disconnect); item not queued
    CLOSED = "closed"          # the reader is gone or was cut earlier; item not queued


class Taken(StrEnum):
    """Why ``take`` returned no item."""

    EMPTY = "empty"            # nothing queued yet; wait
    END = "end"                # the producer closed the channel and everything was taken
    CUT = "cut"                # the channel cut this reader off (disconnect policy)
    GONE = "gone"              # the reader abandoned the channel


class Indexed(Protocol):
    @property
    def index(self) -> int: ...


T = TypeVar("T", bound=Indexed)


@dataclass(frozen=True, slots=True)
class ChannelStats:
    """A snapshot of what a channel decided.

    delivered: items taken by the reader; dropped: items discarded by a drop
    policy; gap_runs: runs of consecutive dropped indices; high_water: the
    deepest the queue got; pauses: times the producer had to wait (block);
    waited_ns: total time it waited; cuts: readers cut off (disconnect).
    """

    capacity: int
    policy: Policy
    delivered: int = 0
    dropped: int = 0
    gap_runs: int = 0
    high_water: int = 0
    pauses: int = 0
    waited_ns: int = 0
    cuts: int = 0


class BoundedChannel(Generic[T]):
    """A FIFO of at most ``capacity`` items with an overflow ``policy``.

    Raises ``ValueError`` for a capacity outside 1..MAX_CAPACITY or an
    unknown policy (the message lists the valid ones).
    """

    def __init__(self, capacity: int, policy: Policy | str = Policy.BLOCK) -> None:
        self.capacity = check_capacity(capacity)
        self.policy = parse_policy(policy)
        self._queue: deque[T] = deque()
        self._closed = False        # producer finished: drain, then END
        self._ended: Taken | None = None  # CUT or GONE: reader side is over
        self._delivered = self._dropped = self._gap_runs = self._high_water = 0
        self._pauses = self._waited_ns = self._cuts = 0
        self._last_dropped = -2
        # Entries the connection's writer wrote whole (each a Send the wire took), replays included: what a
        # connection log reports in every dialect, whatever frames its rendering makes of an entry.
        self.sent = 0

    def __len__(self) -> int:
        return len(self._queue)

    @property
    def reader_gone(self) -> bool:
        """True once the reader was cut off or abandoned the channel."""
        return self._ended is not None

    def offer(self, item: T) -> Outcome:
        """Try to queue ``item`` without waiting; returns what happened."""
        if self._ended is not None or self._closed:
            return Outcome.CLOSED
        if len(self._queue) < self.capacity:
            self._push(item)
            return Outcome.ACCEPTED
        return self._overflow(item)

    def pass_through(self) -> bool:
        """Count an item offered and taken at once, by a reader waiting on this empty, open channel (True); False,
        counting nothing, when the channel is not empty or not open: the item must be offered."""
        if self._queue or self._ended is not None or self._closed:
            return False
        self._delivered += 1
        if not self._high_water:
            self._high_water = 1
        return True

    def _overflow(self, item: T) -> Outcome:
        policy = self.policy
        if policy is Policy.BLOCK:
            return Outcome.FULL
        if policy is Policy.DROP_NEWEST:
            self._count_drop(item.index)
            return Outcome.DROPPED
        if policy is Policy.DROP_OLDEST:
            self._count_drop(self._queue.popleft().index)
            self._push(item)
            return Outcome.EVICTED
        self._cuts += 1
        self._queue.clear()
        self._ended = Taken.CUT
        return Outcome.CUT

    def _push(self, item: T) -> None:
        self._queue.append(item)
        if len(self._queue) > self._high_water:
            self._high_water = len(self._queue)

    def _count_drop(self, index: int) -> None:
        self._dropped += 1
        if index != self._last_dropped + 1:
            self._gap_runs += 1
        self._last_dropped = index

    def take(self) -> T | Taken:
        """Return the oldest item, or why there is none (``Taken``)."""
        if self._queue:
            self._delivered += 1
            return self._queue.popleft()
        if self._ended is not None:
            return self._ended
        return Taken.END if self._closed else Taken.EMPTY

    def close(self) -> None:
        """The producer is done: the reader drains what is queued, then sees END."""
        self._closed = True

    def abandon(self) -> None:
        """The reader left: later offers answer CLOSED and queued items are discarded."""
        if self._ended is None:
            self._ended = Taken.GONE
        self._queue.clear()

    def record_pause(self, waited_ns: int) -> None:
        """Count one producer wait of ``waited_ns`` (the driver measures it)."""
        if waited_ns < 0:
            raise ValueError(f"waited_ns must be non-negative, got {waited_ns!r}")
        self._pauses += 1
        self._waited_ns += waited_ns

    def stats(self) -> ChannelStats:
        """Return a frozen snapshot of the counters."""
        return ChannelStats(
            capacity=self.capacity, policy=self.policy, delivered=self._delivered,
            dropped=self._dropped, gap_runs=self._gap_runs, high_water=self._high_water,
            pauses=self._pauses, waited_ns=self._waited_ns, cuts=self._cuts,
        )
