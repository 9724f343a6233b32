"""The real-time driver: the core's processes stepped by one asyncio event loop, in one thread.

How this works: a process is a generator of effects (``tokenwire.core.effects``)
and ``LoopDriver`` performs each one inside the loop, as the simulation does
on the virtual clock:

- ``Sleep``: the process's deadline advances by the step and a loop timer
  fires at it.  The deadline is absolute (start + the sum of steps), so a
  late timer is not a debt that accumulates: the next step is due at its own
  time, not a step after the late one.  A ``precise`` driver (a report's
  private run, where one 0.5 ms step matters) sets the timer a little early
  and finishes the wait by spinning, since the loop's timers are only as
  fine as the selector's one-millisecond timeout; a server's deadlines are
  gathered per millisecond into one loop timer each.
- ``Put``/``Get``: the stream's non-blocking ``offer``/``take``.  A full
  ``block`` channel or an empty one parks the process on its stream; the
  stream's condition (``SingleThread``) rings the driver on every change,
  and the driver retries that stream's parked processes on the next loop
  turn.  A ``Get`` with a timeout (the heartbeat) is a deadline from when it
  was asked, a loop timer that unparks it with ``TIMEOUT``.
- ``Send``: a ``LoopWire`` (a socket with flow control) writes and either
  answers at once or calls back when its transport has drained (or timed
  out, or lost the peer); an in-memory ``Wire`` (``MemoryReader``) is
  waited for until it is ready, then delivered to.
- ``Spawn``: the new process starts on the next loop turn.
- ``Await``: the awaitable runs as a task; the process resumes with its
  result, or has its exception thrown in.

A process that finishes resolves its future with the generator's return
value (or its exception).  ``LoopDriver.private()`` makes a driver on a loop
of its own for a run that owns the thread (a ``clock=real`` report);
``new_loop()`` is uvloop's loop when the ``fast`` extra is installed and
``TOKENWIRE_LOOP`` does not say ``asyncio``.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from functools import partial
from typing import Any, Protocol

from .core.channel import Outcome, Taken
from .core.clock import RealClock
from .core.effects import TIMEOUT, Await, Get, Process, Put, Send, Sleep, Spawn
from .core.reader import Wire
from .core.sync import SingleThread

__all__ = ["LOOP_ENV", "LoopDriver", "LoopWire", "loop_name", "new_loop"]

# Which loop new_loop() makes: "uvloop" (the default when installed) or "asyncio".
LOOP_ENV = "TOKENWIRE_LOOP"
# The selector's timeout is rounded up to whole milliseconds, so a timer
# fires up to 1 ms late; a precise driver wakes this much early and spins
# the rest (os.sched_yield releases the GIL and returns in under 1 us).
SPIN_NS = 1_200_000
# The grain of a server's timers: deadlines within one tick share a loop timer.
TICK_NS = 1_000_000
# How far behind its deadline an Await may leave a process before the deadline
# moves to the present: a Redis round trip per token (well under this) is
# absorbed by the next Sleep, as a blocking call was; a follower that waited
# a second on the log and then generates does not rush to catch up.
AWAIT_DEBT_NS = 10_000_000
# Effects a process may perform back to back before the loop gets a turn:
# a writer replaying a long log to a fast socket must not starve the others.
STEPS_PER_TURN = 64
_YIELD: Callable[[], object] = getattr(os, "sched_yield", None) or (lambda: time.sleep(0))


def loop_name() -> str:
    """The loop ``new_loop`` makes: ``uvloop`` if installed and not refused by ``TOKENWIRE_LOOP``, else ``asyncio``."""
    wanted = os.environ.get(LOOP_ENV, "uvloop")
    if wanted not in ("uvloop", "asyncio"):
        raise ValueError(f"{LOOP_ENV} must be 'uvloop' or 'asyncio', got {wanted!r}")
    if wanted == "uvloop":
        try:
            import uvloop  # noqa: F401
        except ImportError:
            return "asyncio"
    return wanted


def new_loop() -> asyncio.AbstractEventLoop:
    """Return a new event loop (uvloop's when ``loop_name()`` says so)."""
    if loop_name() == "uvloop":
        import uvloop
        return uvloop.new_event_loop()
    return asyncio.new_event_loop()


class LoopWire(Protocol):
    """A wire whose writes may have to wait: ``send`` returns True/False now, or None and calls ``resume`` later."""

    def send(self, frame: bytes, resume: Callable[[bool], None]) -> bool | None: ...


class _Proc:
    """One running process: its generator, wire, deadline and what it is parked on."""

    __slots__ = ("deadline", "effect", "future", "gen", "key", "resume", "since", "timer", "until", "wire")

    def __init__(self, gen: Process, wire: Wire | LoopWire | None, now: int, future: asyncio.Future[Any]) -> None:
        self.gen, self.wire, self.deadline, self.future = gen, wire, now, future
        self.since = -1                       # when it parked on a full or empty channel (-1: not parked)
        self.effect: Put | Get | None = None
        self.key = 0                          # the stream it is parked on
        self.until = -1                       # the parked Get's timeout, a deadline in ns (-1: none)
        self.timer: asyncio.TimerHandle | None = None   # pending; fires at or before ``until``
        self.resume: Callable[[bool], None] | None = None     # what a LoopWire calls back (made once)


class LoopDriver:
    """Step processes on ``loop`` (the running one by default) against ``clock``.

    ``on_error`` is called with the exception of a process (a producer,
    which nobody awaits); ``spawn_hook``, when set, starts what a ``Spawn``
    effect asks for; ``running`` counts live processes.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None, clock: RealClock | None = None, *,
                 precise: bool = False, on_error: Callable[[BaseException], None] | None = None,
                 spawn_hook: Callable[[Process], object] | None = None) -> None:
        self.loop = loop if loop is not None else asyncio.get_running_loop()
        self.clock = clock or RealClock()
        self.precise = precise
        self.on_error = on_error
        self.spawn_hook = spawn_hook      # what a Spawn effect calls (a registry counts its producers)
        self.running = 0
        self._parked: dict[int, list[_Proc]] = {}
        self._ringing: set[int] = set()
        self._ticks: dict[int, list[tuple[Callable[..., None], tuple[Any, ...]]]] = {}
        self._idle: asyncio.Future[None] | None = None
        self._owns_loop = False

    @classmethod
    def private(cls, clock: RealClock | None = None) -> LoopDriver:
        """A precise driver on a new loop of its own, for ``run``."""
        driver = cls(asyncio.new_event_loop(), clock, precise=True)
        driver._owns_loop = True
        return driver

    # -- processes -------------------------------------------------------------
    def spawn(self, proc: Process, wire: Wire | LoopWire | None = None) -> asyncio.Future[Any]:
        """Start ``proc`` on the next loop turn; returns a future of its return value."""
        future: asyncio.Future[Any] = self.loop.create_future()
        p = _Proc(proc, wire, self.clock.now(), future)
        self.running += 1
        self.loop.call_soon(self._step, p, None)
        return future

    def run(self) -> int:
        """Run the private loop until every process has ended; returns the clock's ns; raises the first error."""
        if not self._owns_loop:
            raise RuntimeError("run() is for a driver made by LoopDriver.private(); await the futures instead")
        errors: list[BaseException] = []
        self.on_error = errors.append
        try:
            if self.running:
                self._idle = self.loop.create_future()
                self.loop.run_until_complete(self._idle)
        finally:
            self.loop.close()
        if errors:
            raise errors[0]
        return self.clock.now()

    def _end(self, p: _Proc, value: Any = None, error: BaseException | None = None) -> None:
        self.running -= 1
        if error is None:
            p.future.set_result(value)
        else:
            p.future.set_exception(error)
            if self.on_error is not None:
                p.future.exception()          # retrieved: reported through on_error, not "never retrieved"
                self.on_error(error)
        if self.running == 0 and self._idle is not None and not self._idle.done():
            self._idle.set_result(None)

    def _step(self, p: _Proc, value: object, error: BaseException | None = None) -> None:
        for _ in range(STEPS_PER_TURN):
            try:
                if error is not None:
                    effect, error = p.gen.throw(error), None
                else:
                    effect = p.gen.send(value)
            except StopIteration as stop:
                self._end(p, stop.value)
                return
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as exc:  # noqa: BLE001 - the process's own error (a CancelledError too)
                self._end(p, error=exc)
                return
            kind = type(effect)
            if kind is Sleep:
                self._sleep(p, effect.ns)  # type: ignore[union-attr]
                return
            if kind is Send:
                sent = self._send(p, effect.frame)  # type: ignore[union-attr]
                if sent is None:
                    return
                value = sent
            elif kind is Spawn:
                (self.spawn_hook or self.spawn)(effect.process)  # type: ignore[union-attr]
                value = None
            elif kind is Await:
                task = asyncio.ensure_future(effect.awaitable, loop=self.loop)  # type: ignore[union-attr]
                task.add_done_callback(partial(self._awaited, p))
                return
            else:
                got = self._attempt(p, effect)  # type: ignore[arg-type]
                if got is _PARKED:
                    return
                value = got
        self.loop.call_soon(self._step, p, value)

    def _awaited(self, p: _Proc, task: asyncio.Future[Any]) -> None:
        now = self.clock.now()
        if now - p.deadline > AWAIT_DEBT_NS:     # a long wait (a follower's read) is not a debt to repay in a burst
            p.deadline = now
        if task.cancelled():
            self._step(p, None, asyncio.CancelledError())
        elif task.exception() is not None:
            self._step(p, None, task.exception())
        else:
            self._step(p, task.result())

    # -- time ------------------------------------------------------------------
    def _sleep(self, p: _Proc, ns: int) -> None:
        p.deadline += ns
        self._at(p.deadline, self._step, p, None)

    def _at(self, deadline: int, callback: Callable[..., None], *args: Any) -> None:
        """Call ``callback(*args)`` at ``deadline`` on the clock (at once if it has passed)."""
        now = self.clock.now()
        left = deadline - now
        if left <= 0:
            self.loop.call_soon(callback, *args)
        elif not self.precise:
            # Deadlines share one loop timer per tick: the loop's timers are only as fine as
            # the selector's millisecond anyway, and a thousand streams then cost a timer
            # per millisecond, not one per token.
            tick = -(-deadline // TICK_NS)
            due = self._ticks.get(tick)
            if due is None:
                due = self._ticks[tick] = []
                self.loop.call_later((tick * TICK_NS - now) / 1e9, self._tick, tick)
            due.append((callback, args))
        elif left > SPIN_NS:
            self.loop.call_later((left - SPIN_NS) / 1e9, self._spin, deadline, callback, args)
        else:
            self.loop.call_soon(self._spin, deadline, callback, args)

    def _tick(self, tick: int) -> None:
        for callback, args in self._ticks.pop(tick, ()):
            callback(*args)

    def _spin(self, deadline: int, callback: Callable[..., None], args: tuple[Any, ...]) -> None:
        now = self.clock.now
        while now() < deadline:
            _YIELD()
        callback(*args)

    # -- wires -----------------------------------------------------------------
    def _send(self, p: _Proc, frame: bytes) -> bool | None:
        wire = p.wire
        if wire is None:
            raise RuntimeError("a process without a wire yielded Send")
        if hasattr(wire, "send"):
            if p.resume is None:
                p.resume = partial(self._step, p)
            return wire.send(frame, p.resume)
        memory: Wire = wire
        ready = memory.ready_at()
        if ready > p.deadline:
            p.deadline = ready                  # the reader is busy until then: wait for it
            if ready > self.clock.now():
                self._at(ready, self._deliver, p, memory, frame)
                return None
        return memory.deliver(frame, self.clock.now())

    def _deliver(self, p: _Proc, wire: Wire, frame: bytes) -> None:
        self._step(p, wire.deliver(frame, self.clock.now()))

    # -- channels --------------------------------------------------------------
    def _attempt(self, p: _Proc, effect: Put | Get) -> object:
        stream = effect.stream
        if type(effect) is Put:
            outcome = stream.offer(effect.item)
            if outcome is Outcome.FULL:
                return self._park(p, effect, self.clock.now())
            if p.since >= 0 or stream.keep_trace:   # the clock is read only when a figure needs it
                now = self.clock.now()
                waited = now - p.since if p.since >= 0 else 0
                channel = stream.channel
                if waited and channel is not None and outcome is not Outcome.CLOSED:
                    channel.record_pause(waited)
                stream.note(now, effect.item.index, outcome.value, waited)
            result: object = outcome
        else:
            got = stream.take(effect.channel)  # type: ignore[union-attr]
            if got is Taken.EMPTY:
                return self._park(p, effect, self.clock.now())
            if stream.keep_trace and not isinstance(got, Taken):
                stream.note(self.clock.now(), got.index, "taken")
            result = got
        if p.since >= 0:
            p.deadline, p.since = max(p.deadline, self.clock.now()), -1   # time blocked is not a debt to repay
        return result

    def _park(self, p: _Proc, effect: Put | Get, now: int) -> object:
        cond = effect.stream.cond
        if not isinstance(cond, SingleThread):
            raise TypeError(f"the event-loop driver needs a stream whose cond is a SingleThread, got {cond!r}")
        key = id(effect.stream)
        hook = cond.hook
        if hook is None or getattr(hook, "func", None) != self._ring:   # a stream another driver rang before
            cond.hook = partial(self._ring, key)
        if p.since < 0:
            p.since = now
            timeout = effect.timeout_ns if isinstance(effect, Get) else None
            if timeout is not None:
                # One timer per process, kept across Gets: deadlines only move later, so a
                # pending timer fires first and re-arms itself for what is left (a heartbeat
                # costs a timer per period, not one per token).
                p.until = now + max(0, timeout)
                if p.timer is None:
                    p.timer = self.loop.call_later(max(0, timeout) / 1e9, self._timed_out, p)
        p.effect, p.key = effect, key
        self._parked.setdefault(key, []).append(p)
        return _PARKED

    def _ring(self, key: int) -> None:
        if key in self._parked and key not in self._ringing:
            self._ringing.add(key)
            self.loop.call_soon(self._retry, key)

    def _retry(self, key: int) -> None:
        self._ringing.discard(key)
        waiting = self._parked.pop(key, None)
        if not waiting:
            return
        for p in waiting:
            effect = p.effect
            assert effect is not None
            got = self._attempt(p, effect)
            if got is _PARKED:
                continue                    # _attempt parked it again
            self._unpark(p)
            self._step(p, got)

    def _timed_out(self, p: _Proc) -> None:
        p.timer = None
        if p.until < 0 or p.effect is None:
            return                              # not waiting on a timed Get any more
        left = p.until - self.clock.now()
        if left > 0:
            p.timer = self.loop.call_later(left / 1e9, self._timed_out, p)
            return
        waiting = self._parked.get(p.key)
        if waiting is None or p not in waiting:
            return
        waiting.remove(p)
        if not waiting:
            del self._parked[p.key]
        p.deadline, p.since, p.effect, p.until = max(p.deadline, self.clock.now()), -1, None, -1
        self._step(p, TIMEOUT)

    def _unpark(self, p: _Proc) -> None:
        p.effect, p.until = None, -1            # a pending timer finds nothing to time out


class _Parked:
    def __repr__(self) -> str:
        return "PARKED"


_PARKED = _Parked()
