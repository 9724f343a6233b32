"""The owner's leases and the readers' presence, renewed together on one timer per event loop.

How this works: ``own`` adds a stream (and the epoch its appends are fenced
by) to those the timer renews, a third of a lease apart, in one
``RENEW_MANY`` call through the writer's next round (which also re-arms
the streams' TTLs), so neither the per-token path nor a long model step
claims anything.  A renewal that finds a stream taken over drops it from
``owned`` (its appends are checked, and refused, from then on); one that
finds it stopped on any instance calls what ``watch_stop`` registered.  The
same timer renews this process's reader presence (``attend``: the streams
read here, ``presence``) in one ``PRESENT_MANY`` call.  On a Redis
Cluster each is one call per slot (a script runs over keys of one slot;
the writer's round sends a node's calls together).  The timer is a
handle, not a task, so a closing loop leaves none behind.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Iterable
from typing import Any

from .clients import Settings
from .presence import ignored, readers_key

__all__ = ["BySlot", "Renewal", "Script"]

# How a renewal is sent: the writer's ``script`` (a script's name, its keys, its arguments -> the reply's future).
Script = Callable[[str, Iterable[str], Iterable[object]], "asyncio.Future[Any]"]
# How the streams are split into calls a cluster takes: the writer's ``Topology.by_slot`` (the streams, the key
# of each -> the streams in groups of one slot; one group on a lone Redis).
BySlot = Callable[[Iterable[str], Callable[[str], str]], list[list[str]]]


class Renewal:
    """One event loop's leases and reader presence, renewed by ``script`` calls on one timer."""

    def __init__(self, settings: Settings, loop: asyncio.AbstractEventLoop, script: Script, by_slot: BySlot) -> None:
        self.settings, self.loop, self._script, self._by_slot = settings, loop, script, by_slot
        self.owned: dict[str, int] = {}       # streams whose lease this instance renews -> their epoch
        self.present: set[str] = set()        # streams with a reader here: their presence is renewed too
        self.on_stop: dict[str, Callable[[], None]] = {}   # owned streams' owners, told when one is stopped
        self._timer: asyncio.TimerHandle | None = None

    def own(self, stream_id: str, epoch: int) -> None:
        """Renew ``stream_id``'s lease on the timer from now on (this instance generates it, in ``epoch``)."""
        self.owned[stream_id] = epoch
        self._arm()

    def disown(self, stream_id: str) -> None:
        self.owned.pop(stream_id, None)
        self.on_stop.pop(stream_id, None)

    def watch_stop(self, stream_id: str, stopped: Callable[[], None]) -> None:
        """Call ``stopped`` when a renewal finds ``stream_id`` stopped (on any instance), until it is disowned."""
        self.on_stop[stream_id] = stopped

    def attend(self, stream_id: str) -> None:
        """Renew this process's reader presence on ``stream_id`` on the timer (``presence``), until ``unattend``."""
        self.present.add(stream_id)
        self._arm()

    def unattend(self, stream_id: str) -> None:
        self.present.discard(stream_id)

    def stop(self) -> None:
        """Renew nothing more until the next ``own`` or ``attend`` (a closing writer; an owner that stalls)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _arm(self) -> None:
        if self._timer is None:
            self._timer = self.loop.call_later(self.settings.lease_ms / 3000, self._renew)

    def _renew(self) -> None:
        """The timer: one call renews every lease held here, one more every reader presence (on a cluster,
        one of each per slot: the writer sends a node's together)."""
        self._timer = None
        if not self.owned and not self.present:
            return
        s = self.settings
        for group in self._by_slot(self.present, lambda sid: s.keys(sid)[0]):
            readers = [readers_key(s.keys(sid)[0]) for sid in group]
            self._script("present_many", readers, [s.owner_id, s.lease_ms, s.ttl_ms]).add_done_callback(ignored)
        for ids in self._by_slot(self.owned, lambda sid: s.keys(sid)[0]):
            keys = [key for sid in ids for key in s.keys(sid)]
            self._script("renew_many", keys, [s.owner_id, s.lease_ms, s.ttl_ms, s.maxlen]).add_done_callback(
                functools.partial(self._renewed, ids))
        self._timer = self.loop.call_later(s.lease_ms / 3000, self._renew)

    def _renewed(self, ids: list[str], done: asyncio.Future[Any]) -> None:
        if done.cancelled() or done.exception() is not None:
            return                          # Redis is away: the appends say so; the next period tries again
        for sid, kept in zip(ids, done.result(), strict=True):
            if kept != 1:
                self.owned.pop(sid, None)   # taken over: its appends are checked (and refused) from now on
            stopped = self.on_stop.pop(sid, None) if kept == 2 else None
            if stopped is not None:
                stopped()                   # stopped elsewhere: the model stops now, not at its next token
