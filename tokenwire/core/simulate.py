"""The virtual-clock driver: runs processes deterministically in one thread.

How this works: each process is stepped from a clock callback.  ``Sleep``
schedules the next step later; ``Send`` schedules it for when the wire is
ready; a ``Put`` or ``Get`` is ``tokenwire.core.exchange``'s (the same
bookkeeping as the event-loop driver's), and one that must wait (a full
``block`` channel, an empty one) parks the process; after every step the
parked processes are tried again (there are only ever a handful), each
only once its stream has been notified since.  A process whose effect
completes at once (a ``Put`` accepted, a ``Get`` with a token waiting, a ``Spawn``) goes on
a first-in-first-out ready queue that runs at the current instant before the
clock moves, which saves a heap round trip per channel operation; the order
of events, and therefore the report, is the same on every run.  If the clock
runs dry while processes are still parked, that is a deadlock in the
processes and is raised, never hidden.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from functools import partial
from typing import Any

from .channel import Outcome, Taken
from .clock import VirtualClock
from .effects import Await, Get, Process, Put, Run, RunLogged, Send, Sleep, Spawn
from .exchange import get, put
from .reader import Wire

__all__ = ["Deadlock", "Simulation"]


class Deadlock(RuntimeError):
    """Processes are waiting on each other and nothing is scheduled."""


@dataclass(slots=True)
class _Parked:
    proc: Process
    wire: Wire | None
    effect: Put | Get
    since: int
    seen: int = -1      # the stream's notification count when last tried (-1: always retry)


class Simulation:
    """Run processes on a ``VirtualClock``."""

    def __init__(self, clock: VirtualClock | None = None) -> None:
        self.clock = clock or VirtualClock()
        self._now = self.clock.now
        self._parked: list[_Parked] = []
        self._ready: deque[tuple[Process, Wire | None, object]] = deque()
        self.results: dict[int, Any] = {}

    def spawn(self, proc: Process, wire: Wire | None = None) -> None:
        """Start ``proc`` at the current instant; its ``Send``s go to ``wire``."""
        self._ready.append((proc, wire, None))

    def run(self) -> int:
        """Run to completion; returns the final time in ns; raises ``Deadlock``."""
        ready, step = self._ready, self._step
        while True:
            while ready:
                step(*ready.popleft())
            if not self.clock.step():
                break
        end = self.clock.now()
        if self._parked:
            waiting = ", ".join(type(p.effect).__name__ for p in self._parked)
            raise Deadlock(f"{len(self._parked)} process(es) still waiting ({waiting}) at {end} ns")
        return end

    def _step(self, proc: Process, wire: Wire | None, value: object) -> None:
        try:
            effect = proc.send(value)
            while type(effect) is Run or type(effect) is RunLogged:   # no lane here: the process takes each step
                effect = proc.send(effect.index)
        except StopIteration as stop:
            self.results[id(proc)] = stop.value
        else:
            if type(effect) is Sleep:       # type(...) is: narrowed by mypy, and cheaper than match (see realtime)
                self.clock.call_later(effect.ns, partial(self._step, proc, wire, None))
            elif type(effect) is Put or type(effect) is Get:
                got = put(effect, -1, self._now) if isinstance(effect, Put) else get(effect, self._now)
                if got is Outcome.FULL or got is Taken.EMPTY:
                    self._parked.append(_Parked(proc, wire, effect, self._now(), _notified(effect)))
                else:
                    self._ready.append((proc, wire, got))
            elif type(effect) is Send:
                self._send(proc, wire, effect.frame)
            elif type(effect) is Spawn:
                self.spawn(effect.process)
                self._ready.append((proc, wire, None))
            elif type(effect) is Await:
                raise TypeError("a process yielded Await on the virtual clock: only a real-time driver awaits")
            else:
                raise TypeError(f"a process yielded {effect!r}, not an effect")
        if self._parked:
            self._retry_parked()

    def _send(self, proc: Process, wire: Wire | None, frame: bytes) -> None:
        if wire is None:
            raise RuntimeError("a process without a wire yielded Send")
        now, ready = self.clock.now(), wire.ready_at()
        if ready <= now:
            self._ready.append((proc, wire, wire.deliver(frame, now)))
        else:
            self.clock.call_at(ready, partial(self._deliver, proc, wire, frame))

    def _deliver(self, proc: Process, wire: Wire, frame: bytes) -> None:
        self._step(proc, wire, wire.deliver(frame, self.clock.now()))

    def _attempt(self, proc: Process, wire: Wire | None, effect: Put | Get, since: int) -> bool:
        """Retry a parked Put or Get (``tokenwire.core.exchange``); False when it must wait still."""
        now = self._now
        got = put(effect, since, now) if isinstance(effect, Put) else get(effect, now)
        if got is Outcome.FULL or got is Taken.EMPTY:
            return False
        self._ready.append((proc, wire, got))
        return True

    def _retry_parked(self) -> None:
        still = []
        for p in self._parked:
            seen = _notified(p.effect)
            if (seen == p.seen and seen >= 0) or not self._attempt(p.proc, p.wire, p.effect, p.since):
                p.seen = seen
                still.append(p)
        self._parked = still


def _notified(effect: Put | Get) -> int:
    """The stream's count of changes, or -1 when it keeps none (then the process is always retried)."""
    return getattr(effect.stream.changes, "count", -1)
