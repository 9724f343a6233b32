"""What a ``Put`` or a ``Get`` does to a stream's channel, written once for every driver.

How this works: a driver that steps a process to a ``Put`` calls ``put``, to a
``Get`` calls ``get``.  Each tries the stream's non-blocking ``offer``/``take``
once and returns a plain outcome: the value the process gets back, or
``Outcome.FULL`` / ``Taken.EMPTY``, which mean "must wait": the driver parks
the process and calls the same function again after the stream's notifier
has rung.  Nothing here waits, reads a clock it does not need, or keeps
state; the bookkeeping that comes with a decision happens here, where it
is made: a producer that waited on a full ``block`` channel has its pause
recorded on the channel, and every decision goes to the stream's trace.

``since`` is when the process first found the channel full (-1 if it never
waited), so the pause is measured from then; ``now`` reads the driver's clock
and is called only when a figure needs it (a live server keeps no trace, so
its tokens pass without a clock read).
"""

from __future__ import annotations

from collections.abc import Callable

from .channel import Outcome, Taken
from .effects import Get, Put
from .frames import TokenItem

__all__ = ["get", "put"]


def put(effect: Put, since: int, now: Callable[[], int]) -> Outcome:
    """Offer ``effect.item`` to its stream; returns the ``Outcome`` (``FULL``: must wait and call again)."""
    stream = effect.stream
    outcome = stream.offer(effect.item)
    if outcome is Outcome.FULL:
        return outcome
    if since >= 0 or stream.keep_trace:
        t_ns = now()
        waited = t_ns - since if since >= 0 else 0
        channel = stream.channel
        if waited and channel is not None and outcome is not Outcome.CLOSED:
            channel.record_pause(waited)
        stream.note(t_ns, effect.item.index, outcome.value, waited)
    return outcome


def get(effect: Get, now: Callable[[], int]) -> TokenItem | Taken:
    """Take from ``effect.channel``; returns the item or why there is none (``Taken.EMPTY``: must wait)."""
    stream = effect.stream
    got = stream.take(effect.channel)
    if got is Taken.EMPTY:
        return got
    if stream.keep_trace and not isinstance(got, Taken):
        stream.note(now(), got.index, "taken")
    return got
