"""The event-loop driver: the core's processes stepped by one asyncio loop, in one thread.

How this works: a process is a generator of effects (``tokenwire.core.effects``)
and ``LoopDriver`` performs each one inside the loop, as the simulation does
on the virtual clock.  It dispatches on ``type(effect) is C`` tests written
out (mypy narrows each, so no cast): ``match`` class patterns cost four
times as much per effect, and a dict of handlers adds a call per effect;
either made 200 in-process streams 3-8% slower per token.

- ``Sleep``: the process's deadline advances by the step and a timer
  (``timers``) calls it back at it.  The deadline is absolute (start + the
  sum of steps), so a late timer is not a debt that accumulates: the next
  step is due at its own time, not a step after the late one.
- ``Put``/``Get``: ``tokenwire.core.exchange``, the same as the simulation's.
  One that must wait parks the process in the ``parking`` lot, which retries
  it when the stream changes (or times a heartbeat ``Get`` out) and wakes it
  here; time spent parked is not a debt to repay either.  A change made
  during a step is retried when that step ends, in the same loop turn: the
  producer's step that offers a token also writes it to a caught-up reader.
- ``Send``: a ``LoopWire`` (``wires``) answers at once or calls back when
  its transport has drained; an in-memory ``Wire`` is waited for until it is
  ready, then delivered to.
- ``Spawn``: the new process starts on the next loop turn.
- ``Await``: the awaitable runs as a task; the process resumes with its
  result, or has its exception thrown in.
- ``Run``, ``RunLogged``: a producer's tokens, taken by the driver's lanes
  (``lanes``: the per-token path, top to bottom) rather than stepped: a
  timer per token and no generator in between; the process goes on (with
  the index it reached) when the run ends or is cancelled.

Effects that complete at once are performed back to back, up to
``STEPS_PER_TURN``, before the loop gets a turn.  A process that finishes
resolves its future with the generator's return value (or its exception).
``LoopDriver.private()`` makes a driver on a loop of its own (``private``)
for a run that owns the thread (a ``clock=real`` report).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from functools import partial
from typing import Any

from ..core.channel import Outcome, Taken
from ..core.clock import RealClock
from ..core.effects import Await, Get, Process, Put, Run, RunLogged, Send, Sleep, Spawn
from ..core.exchange import get, put
from .held import HeldWrites
from .lanes import AWAIT_DEBT_NS, Lanes
from .parking import ParkingLot
from .private import PrivateLoop
from .procs import UNCHECKED, Proc
from .timers import Timers
from .wires import LoopWire, Wire

__all__ = ["AWAIT_DEBT_NS", "STEPS_PER_TURN", "LoopDriver"]

# Effects a process may perform back to back before the loop gets a turn:
# a writer replaying a long log to a fast socket must not starve the others.
STEPS_PER_TURN = 64


class LoopDriver:
    """Step processes on ``loop`` (the running one by default) against ``clock``.

    ``on_error`` is called with the exception of a process (a producer,
    which nobody awaits); ``spawn_hook``, when set, starts what a ``Spawn``
    effect asks for; ``running`` counts live processes.  ``precise`` spins
    the last stretch of every wait (see ``timers``).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None, clock: RealClock | None = None, *,
                 precise: bool = False, on_error: Callable[[BaseException], None] | None = None,
                 spawn_hook: Callable[[Process], object] | None = None) -> None:
        self.loop = loop if loop is not None else asyncio.get_running_loop()
        self.clock = clock or RealClock()
        self.on_error = on_error
        self.spawn_hook = spawn_hook      # what a Spawn effect calls (a registry counts its producers)
        self.running = 0
        self._live: set[Proc] = set()     # the processes not ended yet (``close`` ends them)
        self._now = self.clock.now
        self._timers: Timers[Proc] = Timers(self.loop, self._now, precise)
        self._lot = ParkingLot(self.loop, self._now, self._wake)
        self._resumed, self._delivered = self._step, self._deliver    # the timers' calls, made once
        self._lanes = Lanes(self._lot, self._timers, self._now, self._live, advance=self._advance, step=self._step,
                            wake=self._wake)
        self._private: PrivateLoop | None = None

    @property
    def writes(self) -> HeldWrites:
        """Where a socket's wire writes: held to the end of a tick or a loop turn (``held``)."""
        return self._timers.writes

    @property
    def precise(self) -> bool:
        """True if waits end by spinning (a private run), not on the next millisecond's timer."""
        return self._timers.precise

    @classmethod
    def private(cls, clock: RealClock | None = None) -> LoopDriver:
        """A precise driver on a new loop of its own, for ``run``."""
        owner = PrivateLoop()
        driver = cls(owner.loop, clock, precise=True)
        driver._private = owner
        return driver

    # -- processes -------------------------------------------------------------
    def spawn(self, proc: Process, wire: Wire | LoopWire | None = None) -> asyncio.Future[Any]:
        """Start ``proc`` on the next loop turn; returns a future of its return value."""
        future: asyncio.Future[Any] = self.loop.create_future()
        p = Proc(proc, wire, self._now(), future)
        self._live.add(p)
        self.running += 1
        self.loop.call_soon(self._step, p, None)
        return future

    def run(self) -> int:
        """Run the private loop until every process has ended; returns the clock's ns; raises the first error."""
        if self._private is None:
            raise RuntimeError("run() is for a driver made by LoopDriver.private(); await the futures instead")
        self.on_error = self._private.errors.append
        self._private.run(self.running > 0)
        return self.clock.now()

    def close(self) -> None:
        """End every process now, on the loop, each told with ``GeneratorExit`` (its cleanup runs here, not at
        interpreter exit on a closed loop); their futures are cancelled.  For a server that is stopping."""
        while self._live:
            p = self._live.pop()
            self.running -= 1
            with contextlib.suppress(Exception):
                p.gen.close()
            self._release(p)
            p.future.cancel()

    def _end(self, p: Proc, value: object = None, error: BaseException | None = None) -> None:
        if p not in self._live:
            return                            # ended by ``close`` while a callback was on its way
        self._live.discard(p)
        self.running -= 1
        self._release(p)
        if error is None:
            p.future.set_result(value)
        else:
            p.future.set_exception(error)
            if self.on_error is not None:
                p.future.exception()          # retrieved: reported through on_error, not "never retrieved"
                self.on_error(error)
        if self.running == 0 and self._private is not None:
            self._private.idle()

    def _release(self, p: Proc) -> None:
        """Let go of what an ended process held: its heartbeat timer (which would keep it, its wire and the
        connection behind the wire alive until it fired) and its wires."""
        self._lot.forget(p)
        p.wire = p.memory = None
        p.resume = p.drained = p.held = p.run = p.logged = p.awaited = None
        p.hook = UNCHECKED

    def _step(self, p: Proc, value: object = None, error: BaseException | None = None) -> None:
        """Advance ``p``; then, in the same turn, the processes its step woke (the parking lot's ``flush``)."""
        lot = self._lot
        lot.holding += 1
        try:
            self._advance(p, value, error)
        finally:
            lot.holding -= 1
        if not lot.holding and lot.due:
            lot.flush()

    def _advance(self, p: Proc, value: object, error: BaseException | None) -> None:
        gen, now = p.gen, self._now
        for _ in range(STEPS_PER_TURN):
            try:
                if error is not None:
                    effect, error = gen.throw(error), None
                else:
                    effect = gen.send(value)
            except StopIteration as stop:
                self._end(p, stop.value)
                return
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as exc:  # noqa: BLE001 - the process's own error (a CancelledError too)
                self._end(p, error=exc)
                return
            if type(effect) is Sleep:
                p.deadline += effect.ns
                self._timers.at(p.deadline, self._resumed, p)
                return
            if type(effect) is Put:
                stream, lot = effect.stream, self._lot
                reader = lot.only_getter(stream)
                if reader is not None and stream.hand_over(effect.item):    # caught up: its token is written now
                    self._lanes.hand(reader, effect.item, now())
                    value = Outcome.ACCEPTED
                    continue
                value = put(effect, -1, now)
                if value is Outcome.FULL:
                    lot.park(p, effect, now())
                    return
            elif type(effect) is Get:
                value = get(effect, now)
                if value is Taken.EMPTY:
                    self._lot.park(p, effect, now())
                    return
            elif type(effect) is Send:
                value = self._send(p, effect.frame)
                if value is None:
                    return
            elif type(effect) is Spawn:
                (self.spawn_hook or self.spawn)(effect.process)
                value = None
            elif type(effect) is Run or type(effect) is RunLogged:
                self._lanes.begin(p, effect)
                return
            elif type(effect) is Await:
                task = asyncio.ensure_future(effect.awaitable, loop=self.loop)
                if p.awaited is None:
                    p.awaited = partial(self._awaited, p)      # made once, as ``resume``
                task.add_done_callback(p.awaited)
                return
            else:
                value, error = None, TypeError(f"a process yielded {effect!r}, not an effect")
        self.loop.call_soon(self._step, p, value)

    def _wake(self, p: Proc, value: object) -> None:
        """``p``'s Put/Get completed (or timed out) after a wait (the parking lot's call, or a hand-over): it is
        advanced now, inside the step under way if there is one."""
        now = self._now()
        if now > p.deadline:
            p.deadline = now                           # time blocked is not a debt to repay
        run = p.run
        if run is not None:                            # a run's offer waited: its next token, or the process goes on
            if self._lanes.ran(p, run):
                return
            value = run.index
        if self._lot.holding:
            self._advance(p, value, None)
        else:
            self._step(p, value)

    def _awaited(self, p: Proc, task: asyncio.Future[object]) -> None:
        now = self._now()
        if now - p.deadline > AWAIT_DEBT_NS:     # a long wait (a follower's read) is not a debt to repay in a burst
            p.deadline = now
        if task.cancelled():
            self._step(p, None, asyncio.CancelledError())
        elif task.exception() is not None:
            self._step(p, None, task.exception())
        else:
            self._step(p, task.result())

    # -- wires -----------------------------------------------------------------
    def _send(self, p: Proc, frame: bytes) -> bool | None:
        wire = p.wire
        if wire is not None:
            if p.resume is None:
                p.resume = partial(self._step, p)
            return wire.send(frame, p.resume)
        memory = p.memory
        if memory is None:
            raise RuntimeError("a process without a wire yielded Send")
        ready = memory.ready_at()
        if ready > p.deadline:
            p.deadline = ready                  # the reader is busy until then: wait for it
            if ready > self._now():
                p.frame = frame
                self._timers.at(ready, self._delivered, p)
                return None
        return memory.deliver(frame, self._now())

    def _deliver(self, p: Proc) -> None:
        frame, p.frame = p.frame, b""
        memory = p.memory
        assert memory is not None
        self._step(p, memory.deliver(frame, self._now()))
