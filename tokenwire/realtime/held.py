"""A tick's socket writes, held until the tick's tokens are made and then written back to back.

Why: every write to a socket wakes its reader.  On a machine as busy as its clients (the benches' 2 cores,
a server beside its load balancer), the woken client takes the core while the server is making the next
token, so a server that writes as it goes is switched out once a token: 29,700 context switches in 4 s at
300 streams of 50 tokens a second, against 5,000 with each tick's writes held (``perf stat``, bench/RESULTS.md).
Holding costs a token no time it would not wait anyway: the tick's tokens were due together, and the writes go
out before the loop turns.

How this works: ``Timers`` opens the hold around a tick's calls (``holding``) and writes what was held when they
are done (``release``), in the order it was asked for.  A wire whose connection ends inside the tick writes what
is held first (``release``, which keeps the hold open), so nothing is written after its close.  A write the
kernel does not take whole pauses its connection when it is made, as it would have at once; the wire's next
send then waits for the drain, one frame later than an unheld write would have.  A transport closed or aborted
before the release (its peer gone) is skipped.  An ASGI response's wire holds its frames the same way, and
writes them through its server's ``send`` at the release (``AsgiWire.write``).
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["HeldWrites", "Writable"]


class Writable(Protocol):
    """What a held write is written to: an asyncio transport, or a wire that writes as one (``AsgiWire``)."""

    def is_closing(self) -> bool: ...

    def write(self, data: bytes) -> None: ...


class HeldWrites:
    """Writes held while a tick's calls run (``held`` is None outside one: a wire writes at once)."""

    __slots__ = ("held",)

    def __init__(self) -> None:
        self.held: list[tuple[Writable, bytes]] | None = None

    def holding(self) -> None:
        """A tick's calls begin: writes are held from now on."""
        self.held = []

    def release(self, *, done: bool = True) -> None:
        """Write what is held, in order; ``done``: the tick is over and writes go out at once again."""
        held = self.held
        if held is None:
            return
        self.held = None if done else []
        for transport, data in held or ():
            if not transport.is_closing():
                transport.write(data)
