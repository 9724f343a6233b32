"""The token log: every generated token, by index, per stream.

How this works: a resume replays from here, and generation continues from
the log's length, so no index is generated twice: ``append`` only accepts
the next index (``length``) and refuses anything else with ``IndexConflict``.
Cursors are exclusive (``Last-Event-ID: 17`` means "send 18 on").  The log is
bounded three ways, each a named constant below: how many streams it keeps,
how old a stream may get, and how many tokens of one stream it keeps; what is
trimmed is reported as a ``LogGap`` to a reader whose cursor falls in it, and
what is evicted as ``UnknownStream``, never papered over.

``TokenLog`` is the interface; ``MemoryTokenLog`` the default implementation.
The Redis Streams implementation lives outside the core (it does I/O).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

__all__ = [
    "DEFAULT_MAX_AGE_NS",
    "DEFAULT_MAX_STREAMS",
    "DEFAULT_MAX_TOKENS",
    "IndexConflict",
    "LogError",
    "LogGap",
    "LogUnavailable",
    "MemoryTokenLog",
    "StreamState",
    "TokenLog",
    "UnknownStream",
]

# Enough for a busy single process (each answer is at most a few thousand
# tokens, ~100 KB); past it the least recently written stream is evicted.
DEFAULT_MAX_STREAMS = 1024
# A reconnect normally comes within seconds (EventSource retries after
# `retry` ms); ten minutes covers a laptop lid closed over a coffee.
DEFAULT_MAX_AGE_NS = 600 * 1_000_000_000
# Longer than any answer this tool makes; a long-lived stream keeps its tail.
DEFAULT_MAX_TOKENS = 100_000


class LogError(Exception):
    """Base class for token-log errors."""


class UnknownStream(LogError):
    """The stream was never created here, or was evicted."""

    def __init__(self, stream_id: str) -> None:
        super().__init__(f"unknown stream {stream_id!r} (never created, or evicted from the token log)")
        self.stream_id = stream_id


class LogGap(LogError):
    """A cursor points before the first token the log still keeps."""

    def __init__(self, stream_id: str, cursor: int, first_kept: int) -> None:
        super().__init__(
            f"stream {stream_id!r} no longer holds the tokens after cursor {cursor!r}: "
            f"the log keeps indices from {first_kept} on"
        )
        self.stream_id, self.cursor, self.first_kept = stream_id, cursor, first_kept


class LogUnavailable(LogError):
    """A shared log's store did not answer (down, unreachable, or failing); retry later."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"token log unavailable: {detail}")
        self.detail = detail


class IndexConflict(LogError):
    """An append that is not the next index: it would generate an index twice or leave a hole."""

    def __init__(self, stream_id: str, index: int, expected: int) -> None:
        super().__init__(f"stream {stream_id!r}: cannot append index {index!r}, the next index is {expected}")
        self.stream_id, self.index, self.expected = stream_id, index, expected


class StreamState(StrEnum):
    GENERATING = "generating"
    DONE = "done"
    CANCELLED = "cancelled"


class TokenLog(Protocol):
    """What a token log offers; implemented in memory and on Redis Streams."""

    def create(self, stream_id: str, meta: Mapping[str, Any], total: int) -> None: ...
    def meta(self, stream_id: str) -> Mapping[str, Any]: ...
    def total(self, stream_id: str) -> int: ...
    def append(self, stream_id: str, index: int, token: str) -> None: ...
    def length(self, stream_id: str) -> int: ...
    def read_after(self, stream_id: str, cursor: int, limit: int | None = None) -> list[str]: ...
    def state(self, stream_id: str) -> StreamState: ...
    def set_state(self, stream_id: str, state: StreamState) -> None: ...


@dataclass(slots=True)
class _Entry:
    meta: Mapping[str, Any]
    total: int
    created_ns: int
    first: int = 0                       # index of tokens[0] (after trimming)
    tokens: list[str] = field(default_factory=list)
    state: StreamState = StreamState.GENERATING


class MemoryTokenLog:
    """An in-process ``TokenLog`` with stream, age and size bounds.

    ``now`` is a clock function in ns (a clock's ``now``); ``evictions`` counts
    streams dropped for count or age, ``trimmed`` tokens dropped for size.
    """

    def __init__(
        self,
        now: Callable[[], int],
        *,
        max_streams: int = DEFAULT_MAX_STREAMS,
        max_age_ns: int = DEFAULT_MAX_AGE_NS,
        max_tokens: int = DEFAULT_MAX_TOKENS,
    ) -> None:
        for name, value in (("max_streams", max_streams), ("max_age_ns", max_age_ns), ("max_tokens", max_tokens)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        self._now = now
        self.max_streams, self.max_age_ns, self.max_tokens = max_streams, max_age_ns, max_tokens
        self._streams: OrderedDict[str, _Entry] = OrderedDict()
        self.evictions = 0
        self.trimmed = 0

    def __contains__(self, stream_id: object) -> bool:
        return stream_id in self._streams

    def __len__(self) -> int:
        return len(self._streams)

    def create(self, stream_id: str, meta: Mapping[str, Any], total: int) -> None:
        """Start a stream of ``total`` tokens; raises ``ValueError`` if the id exists."""
        self.expire()
        if stream_id in self._streams:
            raise ValueError(f"stream {stream_id!r} already exists")
        if isinstance(total, bool) or not isinstance(total, int) or total < 0:
            raise ValueError(f"total must be a non-negative int, got {total!r}")
        while len(self._streams) >= self.max_streams:
            self._streams.popitem(last=False)
            self.evictions += 1
        self._streams[stream_id] = _Entry(dict(meta), total, self._now())

    def expire(self) -> int:
        """Evict streams older than ``max_age_ns``; returns how many went."""
        cutoff = self._now() - self.max_age_ns
        old = [sid for sid, e in self._streams.items() if e.created_ns < cutoff]
        for sid in old:
            del self._streams[sid]
        self.evictions += len(old)
        return len(old)

    def _entry(self, stream_id: str) -> _Entry:
        entry = self._streams.get(stream_id)
        if entry is None:
            raise UnknownStream(stream_id)
        return entry

    def meta(self, stream_id: str) -> Mapping[str, Any]:
        return self._entry(stream_id).meta

    def total(self, stream_id: str) -> int:
        return self._entry(stream_id).total

    def append(self, stream_id: str, index: int, token: str) -> None:
        """Log ``token`` at ``index``; raises ``IndexConflict`` unless ``index == length``."""
        entry = self._entry(stream_id)
        expected = entry.first + len(entry.tokens)
        if index != expected or index >= entry.total:
            raise IndexConflict(stream_id, index, expected)
        entry.tokens.append(token)
        self._streams.move_to_end(stream_id)
        if len(entry.tokens) > self.max_tokens:
            drop = len(entry.tokens) - self.max_tokens
            del entry.tokens[:drop]
            entry.first += drop
            self.trimmed += drop

    def length(self, stream_id: str) -> int:
        """Return the number of tokens generated so far (the next index)."""
        entry = self._entry(stream_id)
        return entry.first + len(entry.tokens)

    def read_after(self, stream_id: str, cursor: int, limit: int | None = None) -> list[str]:
        """Return the tokens at ``cursor+1`` on (at most ``limit``).

        Raises ``LogGap`` if index ``cursor+1`` was trimmed, ``UnknownStream``
        if the stream is gone, ``ValueError`` for a cursor below -1.
        """
        if cursor < -1:
            raise ValueError(f"cursor must be -1 or a token index, got {cursor!r}")
        entry = self._entry(stream_id)
        start = cursor + 1 - entry.first
        if start < 0:
            raise LogGap(stream_id, cursor, entry.first)
        stop = None if limit is None else start + limit
        return entry.tokens[start:stop]

    def state(self, stream_id: str) -> StreamState:
        return self._entry(stream_id).state

    def set_state(self, stream_id: str, state: StreamState) -> None:
        self._entry(stream_id).state = StreamState(state)
