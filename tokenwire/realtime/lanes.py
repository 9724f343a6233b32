"""The per-token path: a producer's tokens taken by the driver (a ``Run`` or a ``RunLogged``), top to bottom.

How this works, when the producer runs its tokens as a ``Run`` and the
reader is caught up (its writer waits in a ``Get`` on its empty channel):
the token's timer fires (``make``); the token is made (``Steps.make``:
generated, appended to the log, the stream's bookkeeping); ``offer`` asks
``ParkingLot.only_getter`` for the writer, the only process parked on the
stream, ``Stream.hand_over`` counts the token on its channel, and the frame
is rendered with the writer's own ``Writer`` (``Get.direct``) and written to
the wire; then the next token is timed.  One callback, no loop turn, no
wake-up of the writer, no generator resumed; ``offer`` writes ``hand``'s
frame and write out for that path (``hand`` holds them for the other
callers).

On a shared log (``RunLogged``) the timer starts the token instead
(``start``: generated, its fenced append queued in the log writer's next
round), and the round, which carries every stream's appends in one round
trip, calls ``logged`` for each once Redis has it: from there the token
takes the same path (``offer``), and the next is timed from its deadline,
as a ``Sleep``, an ``Await`` of the append and a ``Put`` would, so a token
still reaches readers only once it is logged.  An error (the lease lost,
Redis away) is raised inside the process, which decides what follows.

A slower reader's tokens are offered to its channel (``exchange.put``, as a
``Put`` would: a full ``block`` channel parks the producer, and the run
goes on when it is woken) and its writer is woken to send them, several in
one write when they are ready together.  A producer that is not a lane
(your model's tokens) takes the same ``hand`` from its ``Put``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from ..core.channel import Outcome, Taken
from ..core.effects import WRITE_FAILED, Get, Put, Run, RunLogged
from ..core.exchange import get, put
from ..core.frames import TokenItem
from .parking import ParkingLot
from .procs import Proc
from .timers import Timers

__all__ = ["AWAIT_DEBT_NS", "Lanes"]

# How far behind its deadline an Await may leave a process before the deadline
# moves to the present: a Redis round trip per token (well under this) is
# absorbed by the next Sleep, as a blocking call was; a follower that waited
# a second on the log and then generates does not rush to catch up.
AWAIT_DEBT_NS = 10_000_000

Advance = Callable[[Proc, object, "BaseException | None"], None]


class Lanes:
    """The driver's lanes: ``begin`` takes a ``Run`` or ``RunLogged`` a process yielded; ``advance`` (the
    driver's) goes on with the process, ``step`` does so in a turn of its own, ``wake`` ends a wait."""

    __slots__ = ("_advance", "_live", "_lot", "_made", "_now", "_started", "_step", "_timers", "_wake")

    def __init__(self, lot: ParkingLot, timers: Timers[Proc], now: Callable[[], int], live: set[Proc], *,
                 advance: Advance, step: Advance, wake: Callable[[Proc, object], None]) -> None:
        self._lot, self._timers, self._now, self._live = lot, timers, now, live
        self._advance, self._step, self._wake = advance, step, wake
        self._made, self._started = self.make, self.start      # the timers' calls, made once

    def begin(self, p: Proc, run: Run | RunLogged) -> None:
        """``p`` yielded ``run``: its first token is timed."""
        p.run = run
        p.deadline += run.steps.cost(run.index)
        self._timers.at(p.deadline, self._made if type(run) is Run else self._started, p)

    def make(self, p: Proc) -> None:
        """A ``Run``'s next token is due: it is made (generated, logged) and offered; ``make``'s error (the
        model's, the log's) is raised inside the process."""
        run = p.run
        if type(run) is not Run:
            return                                    # the process ended (``close``) while its timer was due
        self._take(p, run, None, self._now())

    def start(self, p: Proc) -> None:
        """A ``RunLogged``'s next token is due: it is generated and its append queued; ``logged`` goes on."""
        run = p.run
        if type(run) is not RunLogged:
            return
        if p.logged is None:
            p.logged = partial(self.logged, p)       # made once, as ``resume``
        try:
            run.steps.start(run.index, p.logged)
        except Exception as exc:  # noqa: BLE001 - the model's error, raised inside the process
            p.run = None
            self._step(p, None, exc)

    def logged(self, p: Proc, error: BaseException | None) -> None:
        """The log holds the run's token (``error`` None), or failed to: it is offered as ``make`` offers one,
        or the error raised inside the process (the hand-over's too: nothing is left waiting for a call that
        never comes).  Called in the log's round, which carried every stream's append."""
        run = p.run
        if type(run) is not RunLogged or p not in self._live:
            return                                    # ended (``close``) while its append was in flight
        now = self._now()
        if now - p.deadline > AWAIT_DEBT_NS:          # as an Await: a long wait is not a debt to repay
            p.deadline = now
        self._take(p, run, error, now)

    def _take(self, p: Proc, run: Run | RunLogged, error: BaseException | None, now: int) -> None:
        """``run``'s token is due (``error`` None: made, or taken from the log that holds it) and offered, or
        ``error`` (the log's, or any the making and the hand-over raise) is raised inside the process; the
        processes this wakes go on once it is done (``ParkingLot.flush``)."""
        lot = self._lot
        lot.holding += 1
        try:
            if error is None:
                try:
                    self.offer(p, run, run.steps.make(run.index) if isinstance(run, Run) else run.steps.landed(), now)
                except Exception as exc:  # noqa: BLE001 - the model's, the log's or the hand-over's: the process's
                    error = exc
            if error is not None:
                p.run = None
                self._advance(p, None, error)
        finally:
            lot.holding -= 1
        if not lot.holding and lot.due:
            lot.flush()

    def offer(self, p: Proc, run: Run | RunLogged, item: TokenItem, now: int) -> None:
        """``run``'s token ``item`` is made: written to a caught-up reader, or offered to the stream's channel (a
        full ``block`` channel parks the producer); then the next token is timed, or the process goes on.

        The caught-up reader whose wire takes the frame at once is the path
        of nearly every token, so ``hand``'s frame and write are written out
        here rather than called."""
        run.index += 1
        stream, lot = run.stream, self._lot
        reader = lot.only_getter(stream)
        if reader is not None and stream.hand_over(item):     # caught up: its token is written now
            waiting, wire = reader.effect, reader.wire
            assert type(waiting) is Get
            direct = waiting.direct
            if direct is None or wire is None or reader.drained is None:
                self.hand(reader, item, now)
            else:
                frame = direct.frame(item)
                if frame is not None:
                    taken = wire.send(frame, reader.drained)
                    if taken:
                        direct.wrote(item)
                        lot.wrote(reader, now)
                    else:
                        self._unsent(reader, waiting, item, taken)
        else:
            offer = Put(stream, item)
            if put(offer, -1, self._now) is Outcome.FULL:
                lot.park(p, offer, self._now())
                return
        if not self.ran(p, run, now):
            self._advance(p, run.index, None)

    def ran(self, p: Proc, run: Run | RunLogged, now: int = -1) -> bool:
        """``run``'s token is offered: True if its next is timed, False if the run is over (or cancelled) and the
        process is to go on with the index it reached (``now``: the clock as the caller read it, -1: not read)."""
        if run.index < run.end and not run.steps.cancelled:
            p.deadline += run.steps.cost(run.index)
            self._timers.at(p.deadline, self._made if type(run) is Run else self._started, p, now)
            return True
        p.run = None
        return False

    def hand(self, reader: Proc, item: TokenItem, now: int) -> None:
        """Give ``item`` to ``reader``, a writer waiting caught up in a Get (``ParkingLot.only_getter``).  One that
        lets the driver write for it (``Get.direct``, on a socket's or an ASGI wire) has the frame written here and
        goes on waiting, its heartbeat counted from now; any other is woken with the item."""
        waiting = reader.effect
        assert type(waiting) is Get
        direct, wire = waiting.direct, reader.wire
        if direct is None or wire is None:
            self._lot.unpark(reader)
            self._wake(reader, item)
            return
        frame = direct.frame(item)
        if frame is None:
            return                                    # sent already: it goes on waiting
        if reader.drained is None:
            reader.drained = partial(self.written, reader)     # made once, as ``resume``
        taken = wire.send(frame, reader.drained)
        if taken:
            direct.wrote(item)
            self._lot.wrote(reader, now)
        else:
            self._unsent(reader, waiting, item, taken)

    def _unsent(self, reader: Proc, waiting: Get, item: TokenItem, taken: bool | None) -> None:
        """``hand``'s write was not taken at once: the peer is gone (``taken`` False), or (None) ``written`` is
        called once the wire has drained."""
        self._lot.unpark(reader)
        if taken is False:
            self._wake(reader, WRITE_FAILED)          # the peer is gone
        else:
            reader.held = (waiting, item)             # the wire calls ``written`` when it has drained

    def written(self, reader: Proc, taken: bool) -> None:
        """A frame ``hand`` wrote for ``reader`` drained (``taken``), or the peer went away meanwhile: the writer
        counts it and waits in its Get again, or ends."""
        held, reader.held = reader.held, None
        if reader not in self._live or held is None:
            return
        if not taken:
            self._wake(reader, WRITE_FAILED)
            return
        waiting, item = held
        assert waiting.direct is not None
        waiting.direct.wrote(item)
        got = get(waiting, self._now)
        if got is Taken.EMPTY:
            self._lot.park(reader, waiting, self._now())
        else:
            self._wake(reader, got)
