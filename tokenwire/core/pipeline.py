"""One run of the pipeline: model -> log -> producer -> channel -> writer -> reader.

How this works: ``run(spec)`` builds a stream, an in-memory reader and a
client process that connects, and reconnects with the reader's last event id
whenever a connection ends before ``done`` (the reader hung up, or the
``disconnect`` policy cut it off), after ``retry_ms`` as an ``EventSource``
would.  The same processes run on the virtual clock (deterministic, the
``Simulation``) or in real time on a driver the caller passes (the event
loop's, ``tokenwire.realtime.LoopDriver``: the core imports no I/O, so it
cannot make one itself); ``RunResult`` holds what the reader saw and what the stream
did, and is what the report is built from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from .channel import ChannelStats, Policy, check_capacity, parse_policy
from .clock import VirtualClock, ms_to_ns
from .effects import Process, Sleep
from .frames import DEFAULT_RETRY_MS
from .model import ANSWER, PARTS_ANSWERS, Model, TimingModel, canned_entries
from .reader import MemoryReader, Wire
from .simulate import Simulation
from .sources import Canned, Source
from .stream import Ending, OnDisconnect, Stream, TraceEntry
from .tokenlog import MemoryTokenLog, TokenLog

__all__ = ["ClockKind", "ConnectionRecord", "RunResult", "RunSpec", "merge_stats", "run"]

# A reader that is cut off again and again must not loop forever: far more
# reconnects than any policy here needs (disconnect needs a handful).
MAX_CONNECTIONS = 64


class Now(Protocol):
    """A clock as a run reads it: the time in integer nanoseconds (``VirtualClock``, ``RealClock``)."""

    def now(self) -> int: ...


class Driver(Protocol):
    """What runs the processes: the simulation, or a real-time driver with the same two methods."""

    @property
    def clock(self) -> Now: ...

    def spawn(self, proc: Process, wire: Wire | None = None) -> object: ...
    def run(self) -> int: ...


class ClockKind(StrEnum):
    VIRTUAL = "virtual"
    REAL = "real"


@dataclass(frozen=True, slots=True)
class RunSpec:
    """What to run. Times in ms (floats), counts as ints; validated on creation."""

    tokens: int = 70
    policy: Policy = Policy.BLOCK
    capacity: int = 4
    reader_ms: float = 0.0
    producer_ms: float = 0.5
    ttft_ms: float | None = None          # None: 1.6 x producer_ms, a prompt step
    jitter: float = 0.1
    seed: int = 1
    hang_up_after: int | None = None      # the reader disconnects after this many tokens (0: on open)
    on_disconnect: OnDisconnect = OnDisconnect.CANCEL
    retry_ms: int = DEFAULT_RETRY_MS
    stream_id: str = "run"
    clock: ClockKind = ClockKind.VIRTUAL
    parts: str = "text"                   # the canned answer's text alone, or "tools": every kind of part around it

    def __post_init__(self) -> None:
        if isinstance(self.tokens, bool) or not isinstance(self.tokens, int) or not 1 <= self.tokens <= len(ANSWER):
            raise ValueError(f"tokens must be an int from 1 to {len(ANSWER)}, got {self.tokens!r}")
        for name in ("reader_ms", "producer_ms"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        if self.hang_up_after is not None and not 0 <= self.hang_up_after < self.tokens:
            raise ValueError(f"hang_up_after must be from 0 to tokens-1 ({self.tokens - 1}), "
                             f"got {self.hang_up_after!r}")
        if self.parts not in PARTS_ANSWERS:
            raise ValueError(f"parts must be one of {', '.join(PARTS_ANSWERS)}; got {self.parts!r}")
        object.__setattr__(self, "policy", parse_policy(self.policy))
        object.__setattr__(self, "on_disconnect", OnDisconnect(self.on_disconnect))
        object.__setattr__(self, "clock", ClockKind(self.clock))
        check_capacity(self.capacity)

    def timing(self) -> TimingModel:
        """The seeded timing model this spec describes."""
        ttft = self.ttft_ms if self.ttft_ms is not None else 1.6 * self.producer_ms
        return TimingModel(step_ns=ms_to_ns(self.producer_ms), ttft_ns=ms_to_ns(ttft),
                           jitter=self.jitter, seed=self.seed)

    @property
    def length(self) -> int:
        """How many entries the answer's log holds: ``tokens``, and with ``parts="tools"`` its other parts too."""
        return len(canned_entries(self.tokens, self.parts))

    def model(self) -> Model:
        """The canned answer this spec shapes, with its seeded timing."""
        return Model(canned_entries(self.tokens, self.parts), self.timing())

    def stream(self, stream_id: str, log: TokenLog, source: Source | None = None, **options: Any) -> Stream:
        """A stream in ``log`` with this spec's settings; its source the canned answer (``Canned``) unless given.

        ``options`` are the stream's own (``reads``, ``meta``, ``attach``, ``keep_trace``).
        """
        return Stream(stream_id, source or Canned(self.model()), log, policy=self.policy, capacity=self.capacity,
                      on_disconnect=self.on_disconnect, retry_ms=self.retry_ms, **options)


@dataclass(frozen=True, slots=True)
class ConnectionRecord:
    """One connection as the reader saw it.

    generated_before_next: tokens in the log when the reader reconnected
    (None for the last connection).
    """

    start_index: int
    tokens: int
    last_event_id: str
    ending: Ending
    stats: ChannelStats
    generated_before_next: int | None


@dataclass(frozen=True, slots=True)
class RunResult:
    """Everything one run produced; times in ns since the request started."""

    spec: RunSpec
    frames: tuple[tuple[bytes, ...], ...]   # every frame delivered, per connection
    connections: tuple[ConnectionRecord, ...]
    arrivals_ns: tuple[int, ...]
    ids: tuple[int, ...]
    texts: tuple[str, ...]
    events_read: int
    stats: ChannelStats                     # all connections' channels, summed
    steps: dict[int, int] = field(hash=False)   # model steps per index
    wall_ns: int = 0
    trace: tuple[TraceEntry, ...] = ()
    hung_up_ns: int | None = None           # when the reader hung up (hang_up_after), if it did

    @property
    def text(self) -> str:
        return "".join(self.texts)

    @property
    def generated_total(self) -> int:
        return sum(self.steps.values())


def merge_stats(stats: list[ChannelStats]) -> ChannelStats:
    """Sum several channels' statistics (high water is the maximum)."""
    first = stats[0]
    return ChannelStats(
        capacity=first.capacity, policy=first.policy,
        delivered=sum(s.delivered for s in stats), dropped=sum(s.dropped for s in stats),
        gap_runs=sum(s.gap_runs for s in stats), high_water=max(s.high_water for s in stats),
        pauses=sum(s.pauses for s in stats), waited_ns=sum(s.waited_ns for s in stats),
        cuts=sum(s.cuts for s in stats),
    )


def _client(stream: Stream, reader: MemoryReader, retry_ns: int, records: list[ConnectionRecord]) -> Process:
    cursor = -1
    for _ in range(MAX_CONNECTIONS):
        reader.begin_connection()
        channel = stream.new_channel()
        before = len(reader.ids)
        ending = yield from stream.serve(cursor, channel)
        if ending is Ending.DONE:
            records.append(ConnectionRecord(cursor + 1, len(reader.ids) - before, reader.last_event_id,
                                            ending, channel.stats(), None))
            return
        yield Sleep(retry_ns)
        records.append(ConnectionRecord(cursor + 1, len(reader.ids) - before, reader.last_event_id,
                                        ending, channel.stats(), stream.log.length(stream.stream_id)))
        cursor = reader.cursor
    raise RuntimeError(f"the reader reconnected {MAX_CONNECTIONS} times without finishing")


def run(spec: RunSpec, driver: Driver | None = None) -> RunResult:
    """Run ``spec`` once; returns what the reader saw.

    A virtual-clock spec runs on a new ``Simulation``; a real-clock one on
    ``driver`` (a fresh real-time driver, run here to the end).  Raises
    ``ValueError`` for a bad spec or a real-clock spec without a driver,
    ``Deadlock`` if the processes do not finish (a bug, never expected).
    """
    if spec.clock is ClockKind.VIRTUAL:
        driver = Simulation(VirtualClock())
    elif driver is None:
        raise ValueError("a real-clock run needs a real-time driver: pass tokenwire.realtime.LoopDriver.private()")
    clock = driver.clock
    log = MemoryTokenLog(clock.now, locked=False)
    stream = spec.stream(spec.stream_id, log)
    reader = MemoryReader(ms_to_ns(spec.reader_ms), spec.hang_up_after)
    records: list[ConnectionRecord] = []
    driver.spawn(_client(stream, reader, ms_to_ns(spec.retry_ms), records), reader)
    end = driver.run()
    return RunResult(
        spec=spec, frames=tuple(tuple(f) for f in reader.frames), connections=tuple(records),
        arrivals_ns=tuple(reader.arrivals), ids=tuple(reader.ids), texts=tuple(reader.texts),
        events_read=len(reader.events), stats=merge_stats([r.stats for r in records]),
        steps=dict(stream.source.steps), wall_ns=reader.done_at if reader.done_at is not None else end,
        trace=tuple(stream.trace), hung_up_ns=reader.hung_up_at,
    )
