"""The parking lot: processes waiting on a stream, retried when the stream changes.

How this works: a ``Put`` on a full ``block`` channel or a ``Get`` on an
empty one parks its process here, under the stream.  The stream's change
counter (``Changes``) gets the lot's ``ring`` for that stream as its hook (a
``partial``, which adds no Python frame to every change of every stream),
so every change to the stream rings the lot; the lot retries that stream's
parked processes once however often it rang in between.  A ring during a
driver's step (the producer offering a token to a writer parked on an
empty channel, the usual case) is retried as soon as that step ends, in
the same loop turn (``holding``/``flush``): a caught-up reader's token
crosses no extra loop turn.  A ring from outside a step (a request
handler stopping the stream) is retried on the next loop turn.  A retry is
``tokenwire.core.exchange`` again, as the first attempt was: one that still
must wait parks again (its wait still counted from when it first parked),
one that completes is handed back to the driver (``wake``) with its value,
which steps it at once.

A ``Get`` with a timeout (the heartbeat) has a deadline from when it first
parked, and one loop timer per process kept across Gets: deadlines only
move later, so a pending timer fires first and re-arms itself for what is
left (a heartbeat costs a timer per period, not one per token).  When the
deadline passes with the process still parked, it is woken with ``TIMEOUT``.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from functools import partial

from ..core.changes import Changes
from ..core.channel import Outcome, Taken
from ..core.effects import TIMEOUT, Get, Mailbox, Put
from ..core.exchange import get, put
from .procs import Proc

__all__ = ["ParkingLot"]


class ParkingLot:
    """Processes parked on streams; ``wake(proc, value)`` resumes one whose Put/Get completed or timed out."""

    __slots__ = ("_loop", "_now", "_parked", "_ring", "_ringing", "_wake", "due", "holding")

    def __init__(self, loop: asyncio.AbstractEventLoop, now: Callable[[], int],
                 wake: Callable[[Proc, object], None]) -> None:
        self._loop, self._now, self._wake = loop, now, wake
        self._parked: dict[int, list[Proc]] = {}
        self._ringing: set[int] = set()
        self.due: deque[int] = deque()          # streams rung during a step, retried when the step ends (flush)
        self.holding = 0                        # steps under way (the driver's); rings meanwhile wait for flush
        self._ring = self.ring                  # made once: a hook is ours if its func is this very object

    def park(self, p: Proc, effect: Put | Get, now: int) -> None:
        """Park ``p`` until its stream rings or its Get times out; ``TypeError`` if its changes are not ``Changes``."""
        changes, key = effect.stream.changes, id(effect.stream)
        if getattr(changes, "hook", None) is not p.hook:     # not the hook ``p`` was checked against last time
            if not isinstance(changes, Changes):
                raise TypeError(f"the event-loop driver needs a stream whose changes are counted by Changes, "
                                f"got {changes!r}")
            hook = changes.hook
            if not (isinstance(hook, partial) and hook.func is self._ring and hook.args[0] == key):  # another's
                changes.hook = partial(self._ring, key)
            p.hook = changes.hook
        if p.since < 0:
            p.since = now
            timeout = effect.timeout_ns if isinstance(effect, Get) else None
            if timeout is not None:
                p.until = now + max(0, timeout)
                if p.timer is None:
                    p.timer = self._loop.call_later(max(0, timeout) / 1e9, self._timed_out, p)
        p.effect, p.key = effect, key
        waiting = self._parked.get(key)
        if waiting is None:
            self._parked[key] = [p]
        else:
            waiting.append(p)

    def ring(self, key: int) -> None:
        """The stream ``key`` changed: retry its parked processes when the step under way ends (``flush``), or
        on the next loop turn if none is."""
        if key in self._parked and key not in self._ringing:
            self._ringing.add(key)
            if self.holding:
                self.due.append(key)
            else:
                self._loop.call_soon(self._retry, key)

    def flush(self) -> None:
        """Retry the streams rung during the step that just ended (the driver calls it when ``due`` is not empty
        and no step is under way); what the retried processes ring in turn is retried here too."""
        due = self.due
        self.holding += 1
        try:
            while due:
                self._retry(due.popleft())
        finally:
            self.holding -= 1

    def _retry(self, key: int) -> None:
        self._ringing.discard(key)
        waiting = self._parked.pop(key, None)
        if not waiting:
            return
        now = self._now
        for p in waiting:
            effect = p.effect
            assert effect is not None
            got = put(effect, p.since, now) if isinstance(effect, Put) else get(effect, now)
            if got is Outcome.FULL or got is Taken.EMPTY:     # must wait still
                self.park(p, effect, now())
                continue
            p.since, p.effect, p.until = -1, None, -1     # a pending timer finds nothing to time out
            self._wake(p, got)

    def only_getter(self, stream: Mailbox) -> Proc | None:
        """The process parked on ``stream`` if it is the only one and waits in a ``Get`` on the stream's attached
        channel (the caught-up writer of its reader of record), else None."""
        waiting = self._parked.get(id(stream))
        if waiting is None or len(waiting) != 1:
            return None
        p = waiting[0]
        effect = p.effect
        return p if type(effect) is Get and effect.channel is stream.channel else None

    def unpark(self, p: Proc) -> None:
        """Take ``p`` (what ``only_getter`` gave) off the lot: it is handed its item now (a pending timer then
        finds nothing to time out)."""
        del self._parked[p.key]
        p.since, p.effect, p.until = -1, None, -1

    def wrote(self, p: Proc, now: int) -> None:
        """The driver wrote a token for ``p``, which goes on waiting: its heartbeat Get times out a period from
        ``now`` (its timer re-arms itself for what is left)."""
        effect = p.effect
        if p.until >= 0 and type(effect) is Get and effect.timeout_ns is not None:
            p.until = now + max(0, effect.timeout_ns)

    def forget(self, p: Proc) -> None:
        """``p`` ended: cancel its timer and take it off the lot, so nothing here keeps it alive."""
        if p.timer is not None:
            p.timer.cancel()
            p.timer = None
        if p.effect is not None:
            waiting = self._parked.get(p.key)
            if waiting is not None and p in waiting:
                waiting.remove(p)
                if not waiting:
                    del self._parked[p.key]
        p.since, p.effect, p.until = -1, None, -1

    def _timed_out(self, p: Proc) -> None:
        p.timer = None
        if p.until < 0 or p.effect is None:
            return                              # not waiting on a timed Get any more
        left = p.until - self._now()
        if left > 0:
            p.timer = self._loop.call_later(left / 1e9, self._timed_out, p)
            return
        waiting = self._parked.get(p.key)
        if waiting is None or p not in waiting:
            return
        waiting.remove(p)
        if not waiting:
            del self._parked[p.key]
        p.since, p.effect, p.until = -1, None, -1
        self._wake(p, TIMEOUT)
