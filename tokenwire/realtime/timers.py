"""Deadline timers on an event loop: a callback at an absolute time on the driver's clock.

How this works: a process's ``Sleep`` advances its deadline and asks for a
call at it.  A deadline already passed is a call on the next loop turn.
A server's deadlines share one loop timer per tick of 1 ms (``TICK_NS``):
the loop's timers are only as fine as the selector's millisecond anyway,
and a thousand streams then cost a timer per tick, not one per token; the
calls of one tick run in the order they were asked for, and the socket
writes they make go out together once they are done (``held``).  A
``precise`` driver (a report's private run, where one 0.5 ms step matters)
sets the timer a little early instead and finishes the wait by spinning;
the spin holds the loop, so nothing else runs during the last ``SPIN_NS``
of a wait (a memory reader slower than the producer by less than that
never lets a ``block`` channel fill on the real clock).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from typing import Generic, TypeVar

from .held import HeldWrites

__all__ = ["SPIN_NS", "TICK_NS", "Timers"]

# The selector's timeout is rounded up to whole milliseconds, so a timer
# fires up to 1 ms late; a precise driver wakes this much early and spins
# the rest (os.sched_yield releases the GIL and returns in under 1 us).
SPIN_NS = 1_200_000
# The grain of a server's timers: deadlines within one tick share a loop timer (and their writes go out
# together).  2 ms measured 5-15% less CPU a token side by side at 300 streams (fewer wake-ups, larger
# bursts of writes), but a token may then be 2 ms late: on the Redis log, whose rounds gather up to 3 ms
# more, ITL p95 went from 1.16-1.17x to 1.19-1.20x of 20 ms, at the edge of item 14's 1.25x.
TICK_NS = 1_000_000
_YIELD: Callable[[], object] = getattr(os, "sched_yield", None) or (lambda: time.sleep(0))

T = TypeVar("T")


class Timers(Generic[T]):
    """Call ``callback(arg)`` at a deadline on ``now``'s clock, on ``loop``; ``precise`` spins the last stretch."""

    __slots__ = ("_loop", "_now", "_ticks", "precise", "writes")

    def __init__(self, loop: asyncio.AbstractEventLoop, now: Callable[[], int], precise: bool) -> None:
        self._loop, self._now, self.precise = loop, now, precise
        self._ticks: dict[int, list[tuple[Callable[[T], None], T]]] = {}
        self.writes = HeldWrites(None if precise else loop)   # writes, held to the end of a tick or a turn

    def at(self, deadline: int, callback: Callable[[T], None], arg: T, now: int = -1) -> None:
        """Call ``callback(arg)`` at ``deadline`` (ns on the clock), or on the next loop turn if it has passed;
        ``now``: the clock as the caller just read it (-1: read it here)."""
        if now < 0:
            now = self._now()
        left = deadline - now
        if left <= 0:
            self._loop.call_soon(callback, arg)
        elif not self.precise:
            tick = -(-deadline // TICK_NS)
            due = self._ticks.get(tick)
            if due is None:
                due = self._ticks[tick] = []
                self._loop.call_later((tick * TICK_NS - now) / 1e9, self._tick, tick)
            due.append((callback, arg))
        elif left > SPIN_NS:
            self._loop.call_later((left - SPIN_NS) / 1e9, self._spin, deadline, callback, arg)
        else:
            self._loop.call_soon(self._spin, deadline, callback, arg)

    def _tick(self, tick: int) -> None:
        writes = self.writes
        writes.holding()
        try:
            for callback, arg in self._ticks.pop(tick, ()):
                callback(arg)
        finally:
            writes.release()

    def _spin(self, deadline: int, callback: Callable[[T], None], arg: T) -> None:
        now = self._now
        while now() < deadline:
            _YIELD()
        callback(arg)
