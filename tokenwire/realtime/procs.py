"""One running process as the event-loop driver keeps it: its generator, wire, deadline and what it waits on.

How this works: the driver makes one ``Proc`` per spawned process and hands
it to its timers and its parking lot, which are the only other code that
reads or writes it.  A plain slotted class, not a dataclass: its fields
change on every step, and it is made once per process, not per token.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from ..core.effects import Get, Process, Put, Run, RunLogged, TokenItem
from .wires import LoopWire, Wire, split

__all__ = ["UNCHECKED", "Proc"]

UNCHECKED: object = object()     # a ``Proc.hook`` no stream's hook is: the next park checks the stream's


class Proc:
    """A running process: see the field comments."""

    __slots__ = ("awaited", "deadline", "drained", "effect", "frame", "future", "gen", "held", "hook", "key", "logged",
                 "memory", "resume", "run", "since", "timer", "until", "wire")

    def __init__(self, gen: Process, wire: Wire | LoopWire | None, now: int, future: asyncio.Future[Any]) -> None:
        self.gen, self.deadline, self.future = gen, now, future     # deadline: when its pacing says it is due
        self.wire, self.memory = split(wire)   # the wire a Send writes to: one that calls back, or one in memory
        self.frame = b""                       # a frame waiting for the in-memory reader to be ready
        self.resume: Callable[[bool], None] | None = None     # what a LoopWire calls back (made once)
        self.drained: Callable[[bool], None] | None = None    # the same for a frame the driver wrote for it
        self.held: tuple[Get, TokenItem] | None = None         # that frame's Get and token, while it drains
        self.run: Run | RunLogged | None = None   # the lane of steps the driver takes for it (``lanes``)
        self.logged: Callable[[BaseException | None], None] | None = None   # what a RunLogged's log calls
        self.awaited: Callable[[asyncio.Future[Any]], None] | None = None   # what an Await's future calls
        # What the parking lot keeps while the process waits on a stream:
        self.since = -1                        # when it parked on a full or empty channel (-1: not parked)
        self.effect: Put | Get | None = None   # the Put or Get it waits to retry
        self.key = 0                           # the stream it is parked on
        self.hook: object = UNCHECKED          # that stream's change hook, the lot's own, as last checked
        self.until = -1                        # the parked Get's timeout, a deadline in ns (-1: none)
        self.timer: asyncio.TimerHandle | None = None   # pending; fires at or before ``until``
