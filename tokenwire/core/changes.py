"""What changed on a stream, counted: how a parked process learns that it may go on.

How this works: every driver runs all of a stream's processes on one
thread (the simulation on the virtual clock, the event loop in real time),
so nothing needs a lock or a condition to wait on.  What a parked process
needs is to be tried again when something it could be waiting for has
changed: every such change (a token offered or taken, a reader attached or
gone, the answer ended) calls the stream's ``Changes.changed``, which counts
it (the simulation retries a parked process only after a change, since
nothing it waits for can be different without one) and calls ``hook`` when
a driver has set one (the event-loop driver sets it when a process parks
on the stream, to retry it in the loop).
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["Changes"]


class Changes:
    """A stream's change counter: ``changed()`` adds one to ``count`` and calls ``hook`` (a driver's) if set."""

    __slots__ = ("count", "hook")

    def __init__(self) -> None:
        self.count = 0
        self.hook: Callable[[], None] | None = None

    def changed(self) -> None:
        self.count += 1
        if self.hook is not None:
            self.hook()
