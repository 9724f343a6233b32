"""The real-clock driver: each process on its own thread, in real time.

How this works: a process's ``Sleep``s advance a private deadline, and the
thread sleeps until that deadline (``RealClock.sleep_until``), so per-token
overhead does not accumulate into drift.  A ``Put`` on a full ``block``
channel or a ``Get`` on an empty one waits on the stream's condition, which
every channel operation notifies; after a real wait the deadline restarts
from the present, since the time spent blocked is not a debt to repay.
``run_process`` is the loop itself, so the socket server can run a writer on
its own request thread with a socket as the wire.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from .channel import Outcome, Taken
from .clock import RealClock
from .effects import TIMEOUT, Effect, Get, Process, Put, Send, Sleep, Spawn
from .reader import Wire

__all__ = ["Threads", "run_process"]


def run_process(proc: Process, clock: RealClock, wire: Wire | None,
                spawn: Callable[[Process], None]) -> Any:
    """Run ``proc`` to completion on this thread; returns its return value."""
    deadline = clock.now()
    value: object = None
    while True:
        try:
            effect = proc.send(value)
        except StopIteration as stop:
            return stop.value
        value, deadline = _perform(effect, clock, wire, spawn, deadline)


def _perform(effect: Effect, clock: RealClock, wire: Wire | None,
             spawn: Callable[[Process], None], deadline: int) -> tuple[object, int]:
    if isinstance(effect, Sleep):
        deadline += effect.ns
        clock.sleep_until(deadline)
        return None, deadline
    if isinstance(effect, Send):
        if wire is None:
            raise RuntimeError("a process without a wire yielded Send")
        ready = wire.ready_at()
        if ready > deadline:
            clock.sleep_until(ready)
            deadline = ready
        return wire.deliver(effect.frame, clock.now()), deadline
    if isinstance(effect, Spawn):
        spawn(effect.process)
        return None, deadline
    if isinstance(effect, Put):
        return _put(effect, clock, deadline)
    return _get(effect, clock, deadline)


def _put(effect: Put, clock: RealClock, deadline: int) -> tuple[object, int]:
    stream, start, paused = effect.stream, clock.now(), False
    with stream.cond:
        outcome = stream.offer(effect.item)
        while outcome is Outcome.FULL:
            paused = True
            stream.cond.wait()
            outcome = stream.offer(effect.item)
        now = clock.now()
        waited = now - start if paused else 0
        if paused and stream.channel is not None and outcome is not Outcome.CLOSED:
            stream.channel.record_pause(waited)
        stream.note(now, effect.item.index, outcome.value, waited)
    return outcome, (max(deadline, now) if paused else deadline)


def _get(effect: Get, clock: RealClock, deadline: int) -> tuple[object, int]:
    stream = effect.stream
    # The timeout is a deadline: a wake-up meant for someone else must not restart it.
    until = None if effect.timeout_ns is None else clock.now() + effect.timeout_ns
    waited = False
    with stream.cond:
        got = stream.take(effect.channel)
        while got is Taken.EMPTY:
            waited = True
            left = None if until is None else (until - clock.now()) / 1e9
            if (left is not None and left <= 0) or not stream.cond.wait(left):
                return TIMEOUT, clock.now()
            got = stream.take(effect.channel)
        now = clock.now()
        if not isinstance(got, Taken):
            stream.note(now, got.index, "taken")
    return got, (max(deadline, now) if waited else deadline)


class Threads:
    """Run processes on real threads against a ``RealClock``."""

    def __init__(self, clock: RealClock | None = None) -> None:
        self.clock = clock or RealClock()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self.errors: list[BaseException] = []

    def spawn(self, proc: Process, wire: Wire | None = None) -> None:
        """Start ``proc`` on a new daemon thread; its ``Send``s go to ``wire``."""
        thread = threading.Thread(target=self._run, args=(proc, wire), daemon=True, name="tokenwire-process")
        with self._lock:
            self._threads.append(thread)
        thread.start()

    def _run(self, proc: Process, wire: Wire | None) -> None:
        try:
            run_process(proc, self.clock, wire, self.spawn)
        except BaseException as exc:  # surfaced by join(), never swallowed
            self.errors.append(exc)

    def join(self, timeout_s: float = 60.0) -> int:
        """Wait for every process (spawned ones too); returns the clock's ns.

        Raises ``TimeoutError`` if they are not done in ``timeout_s``, or the
        first exception a process raised.
        """
        end = self.clock.now() + int(timeout_s * 1e9)
        while True:
            with self._lock:
                pending = [t for t in self._threads if t.is_alive()]
            if not pending:
                break
            pending[0].join(max(0.0, (end - self.clock.now()) / 1e9))
            if self.clock.now() >= end and pending[0].is_alive():
                raise TimeoutError(f"{len(pending)} process thread(s) still running after {timeout_s} s")
        if self.errors:
            raise self.errors[0]
        return self.clock.now()
