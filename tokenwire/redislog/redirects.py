"""Following a cluster's redirects: a call ``MOVED``, ``ASK``-ed or told ``TRYAGAIN`` is sent again, within bounds.

How this works: the writer asks ``follow`` about each reply of a round.  A
``MOVED`` moves the slot in the topology at once and queues one ``CLUSTER
SLOTS`` (others may have moved too); an ``ASK`` marks the call to go once to
the target after ``ASKING``; a ``TRYAGAIN`` asks the next round to wait
``TRYAGAIN_S``.  A call redirected more than ``MAX_REDIRECTS`` times fails as
Redis failing does (``LogUnavailable``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from redis.exceptions import MovedError

from .clients import Settings, unavailable
from .rounds import Append, Command, settle
from .topology import Topology, redirect

__all__ = ["MAX_REDIRECTS", "TRYAGAIN_S", "Redirects"]

# A call a cluster redirects (MOVED, ASK, TRYAGAIN) is sent again this many times: a resharding moves a slot
# once (MOVED), an ASK is followed by one call on the target, so a few cover a slot moved twice meanwhile.
MAX_REDIRECTS = 5
# How long the round after a TRYAGAIN waits (a script's keys are half migrated: the rest follows within
# milliseconds); the calls go again in their order, so a stream's appends never overtake one another.
TRYAGAIN_S = 0.02


class Redirects:
    """What a writer does with a cluster's redirects; ``redirected`` counts them (for the tests)."""

    __slots__ = ("_command", "_mapping", "_settings", "_topology", "pause", "redirected")

    def __init__(self, settings: Settings, topology: Topology, command: Callable[..., asyncio.Future[Any]]) -> None:
        self._settings, self._topology, self._command = settings, topology, command
        self.pause = False                    # a TRYAGAIN came back: the next round waits TRYAGAIN_S
        self._mapping = False                 # a CLUSTER SLOTS is queued (after a MOVED)
        self.redirected = 0

    def follow(self, item: Append | Command, reply: Any) -> bool:
        """True if ``reply`` sends ``item`` again (``MOVED``, ``ASK``, ``TRYAGAIN``; the caller queues it), or
        fails it, past ``MAX_REDIRECTS``; False for any other reply."""
        if not redirect(reply):
            return False
        self.redirected += 1
        item.redirects += 1
        if item.redirects > MAX_REDIRECTS:
            settle(item.future, error=unavailable(self._settings, reply))
            return False
        if isinstance(reply, MovedError):
            self._topology.moved(reply)
            self._ask_map()
        elif hasattr(reply, "host"):                   # ASK: this call once on the target
            item.asking = f"{reply.host}:{reply.port}"
        else:
            self.pause = True                           # TRYAGAIN: a moment later
        return True

    def _ask_map(self) -> None:
        """Queue one ``CLUSTER SLOTS`` (a slot moved: others may have too), unless one is queued."""
        if self._mapping:
            return
        self._mapping = True

        def mapped(done: asyncio.Future[Any]) -> None:
            self._mapping = False
            if not done.cancelled() and done.exception() is None:
                self._topology.learn(done.result())
        self._command("CLUSTER", "SLOTS").add_done_callback(mapped)
