"""Clocks: virtual time for deterministic runs, real time for measured ones.

How this works: ``VirtualClock`` is a discrete-event scheduler.  Callbacks sit
in a heap ordered by ``(time, sequence)``, so two events at the same instant
run in the order they were scheduled (as in SimPy), and time only moves
forward: scheduling in the past is a ``ClockError``.  ``RealClock`` reads
``perf_counter_ns`` and paces by absolute deadlines: a process that sleeps
"until start + i * period" does not accumulate the per-step overhead that a
chain of relative ``sleep(period)`` calls does.  A short wait sleeps most of
the way and spins for the last stretch, because ``time.sleep`` overshoots by
tens of microseconds, a tenth of a 0.5 ms step; the spin calls
``os.sched_yield``, which releases the GIL and returns in under a
microsecond (``time.sleep(0)`` is itself a timed sleep, 50-100 us on Linux:
the timer slack).  A long wait only sleeps: its overshoot is a tiny
fraction of it and never accumulates across deadlines.  (A server does not
pace with this clock's ``sleep_until``: the event-loop driver's timers do.)
"""

from __future__ import annotations

import heapq
import itertools
import os
import time
from collections.abc import Callable

__all__ = ["ClockError", "RealClock", "VirtualClock", "ms_to_ns", "ns_to_ms"]

# time.sleep on Linux overshoots by roughly 50-100 us; finishing the last
# 200 us by spinning keeps a 0.5 ms period within a few percent.
SPIN_NS = 200_000
# Waits longer than this are slept whole: 100 us late is under 2% of them,
# and a slow reader's steps should not each burn a spin.  Shorter ones (a
# 0.5 ms model step, a reader's few ms) are where the spin pays.
SPIN_LIMIT_NS = 5_000_000
# What the spin calls: sched_yield where there is one (POSIX), else sleep(0).
_YIELD: Callable[[], object] = getattr(os, "sched_yield", None) or (lambda: time.sleep(0))


class ClockError(RuntimeError):
    """A clock was asked to do something impossible, such as go backwards."""


def ms_to_ns(ms: float) -> int:
    """Convert milliseconds to integer nanoseconds (rounded)."""
    return round(ms * 1_000_000)


def ns_to_ms(ns: int | float) -> float:
    """Convert nanoseconds to milliseconds."""
    return ns / 1_000_000


class VirtualClock:
    """Integer-nanosecond simulated time driven by a heap of callbacks."""

    def __init__(self) -> None:
        self._now = 0
        self._heap: list[tuple[int, int, Callable[[], None]]] = []
        self._seq = itertools.count()

    def now(self) -> int:
        """Return the current virtual time in ns."""
        return self._now

    def call_at(self, when: int, callback: Callable[[], None]) -> None:
        """Run ``callback`` at virtual time ``when``; raises ``ClockError`` if that is in the past."""
        if when < self._now:
            raise ClockError(f"cannot schedule at {when!r} ns, the clock is already at {self._now} ns")
        heapq.heappush(self._heap, (when, next(self._seq), callback))

    def call_later(self, delay: int, callback: Callable[[], None]) -> None:
        """Run ``callback`` ``delay`` ns from now; raises ``ClockError`` for a negative delay."""
        if delay < 0:
            raise ClockError(f"delay must be non-negative, got {delay!r} ns")
        self.call_at(self._now + delay, callback)

    def step(self) -> bool:
        """Run the next callback; returns False when nothing is scheduled."""
        if not self._heap:
            return False
        when, _, callback = heapq.heappop(self._heap)
        self._now = when
        callback()
        return True

    def run(self) -> int:
        """Run until nothing is scheduled; returns the final time in ns."""
        while self.step():
            pass
        return self._now


class RealClock:
    """Monotonic wall time in ns, with deadline sleeps."""

    def __init__(self) -> None:
        self._origin = time.perf_counter_ns()

    def now(self) -> int:
        """Return ns since this clock was made."""
        return time.perf_counter_ns() - self._origin

    def sleep_until(self, deadline: int) -> None:
        """Sleep until ``now() >= deadline``; returns at once if it already is."""
        remaining = deadline - self.now()
        if remaining > SPIN_LIMIT_NS:
            time.sleep(remaining / 1e9)
            remaining = deadline - self.now()   # <= 0 where sleep is monotonic, as on Linux
        if remaining > 0:
            if remaining > SPIN_NS:
                time.sleep((remaining - SPIN_NS) / 1e9)
            target, clock, spin = deadline + self._origin, time.perf_counter_ns, _YIELD
            while clock() < target:
                spin()
