"""A loop of its own, for a run that owns the thread (a ``clock=real`` report, a benchmark).

How this works: ``LoopDriver.private()`` makes a ``PrivateLoop`` and a
precise driver on its loop; the driver's ``run`` hands it here.  The loop
runs until the driver says it is idle (its last process ended), then is
closed; the first error a process ended with is raised to the caller, since
nobody awaits a private run's futures.  A server's driver has no private
loop: it runs on the server's, which is never closed here.
"""

from __future__ import annotations

import asyncio

__all__ = ["PrivateLoop"]


class PrivateLoop:
    """An event loop that one driver owns; ``errors`` collects what its processes ended with."""

    __slots__ = ("_idle", "errors", "loop")

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.errors: list[BaseException] = []
        self._idle: asyncio.Future[None] | None = None

    def run(self, busy: bool) -> None:
        """Run the loop until ``idle()`` (not at all unless ``busy``), close it; raises the first error reported."""
        try:
            if busy:
                self._idle = self.loop.create_future()
                self.loop.run_until_complete(self._idle)
        finally:
            self.loop.close()
        if self.errors:
            raise self.errors[0]

    def idle(self) -> None:
        """The driver's last process ended: ``run`` returns."""
        if self._idle is not None and not self._idle.done():
            self._idle.set_result(None)
