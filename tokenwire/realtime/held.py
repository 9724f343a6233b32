"""A loop turn's socket writes, held until the turn's tokens are made and then written back to back.

Why: every write to a socket wakes its reader.  On a machine as busy as its clients (the benches' 2 cores,
a server beside its load balancer), the woken client takes the core while the server is making the next
token, so a server that writes as it goes is switched out once a token: 29,700 context switches in 4 s at
300 streams of 50 tokens a second, against 5,000 with the writes held (``perf stat``, bench/RESULTS.md).
Holding costs a token no time it would not wait anyway: the turn's tokens were ready together, and the
writes go out before the loop waits again.

How this works: a wire asks ``hold_for`` for the list to put a write on. Inside a tick of the driver's timers
(``holding``, then ``release`` once its calls are done) that is the tick's; anywhere else (a Redis round's
replies, a model's token that arrived by a task) the first write of a turn opens a hold that a callback the
loop runs after every one ready now releases. The writes go out in the order they were asked for. A wire whose
connection ends meanwhile writes what is held first (``release(done=False)``, which keeps the hold open), so
nothing is written after its close. A wire holds one frame a turn: its second (a replay's next batch) writes
the first and itself at once, so a write the kernel does not take whole pauses the connection then, and the
writer waits for the drain as it would unheld (after one more frame, at most). A transport closed or aborted
before the release (its peer gone) is skipped. An ASGI response's wire holds its frames the same way, and
writes them through its server's ``send`` at the release (``AsgiWire.write``). Without a loop (a precise
driver's: a report's run, where each write's moment is the point) nothing is held outside a tick, and a
precise driver has no ticks.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

__all__ = ["HeldWrites", "Writable"]

logger = logging.getLogger("tokenwire")


class Writable(Protocol):
    """What a held write is written to: an asyncio transport, or a wire that writes as one (``AsgiWire``)."""

    def is_closing(self) -> bool: ...

    def write(self, data: bytes) -> None: ...


class HeldWrites:
    """Writes held until the loop turn (or the tick) that made them is done; ``held`` is None while none is."""

    __slots__ = ("_loop", "_release", "held")

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._loop = loop
        self._release = self.release          # the loop's call, made once
        self.held: list[tuple[Writable, bytes]] | None = None

    def hold_for(self, last: list[tuple[Writable, bytes]] | None) -> list[tuple[Writable, bytes]] | None:
        """The list a wire's write goes on (``last``: the one its previous write went on), opened for this turn if
        none is.  None: write at once, when there is no loop, or when the wire has a frame held already: that is
        written now, first, so a writer that sends again in one turn (a replay) meets its connection's
        backpressure as an unheld one does, after one frame, not after a turn's worth."""
        held = self.held
        if held is None:
            if self._loop is None:
                return None
            held = self.held = []
            self._loop.call_soon(self._release)
        elif held is last:
            self.release(done=False)
            return None
        return held

    def holding(self) -> None:
        """A tick's calls begin: writes are held from now on (with those of the turn held already)."""
        if self.held is None:
            self.held = []

    def release(self, *, done: bool = True) -> None:
        """Write what is held, in order; ``done``: writes go out at once again until the next hold."""
        held = self.held
        if held is None:
            return
        self.held = None if done else []
        for target, data in held:
            if not target.is_closing():
                try:
                    target.write(data)
                except Exception as exc:  # noqa: BLE001 - one target's bug must not drop the others' frames
                    logger.error("a held write failed: %s: %s", type(exc).__name__, exc)
        held.clear()                          # a wire's ``last`` keeps the list, not its frames
