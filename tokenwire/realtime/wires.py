"""The two kinds of wire a ``Send`` writes to, told apart once when a process starts.

How this works: a ``LoopWire`` (a socket's ``TransportWire``, the ASGI
adapter's ``AsgiWire``) takes a frame and answers True/False at once, or
None and calls ``resume`` with the answer later (its transport drained, timed
out or lost the peer).  An in-memory ``Wire`` (``MemoryReader``) says when it
can next accept a frame and takes it then; the driver waits for it with a
timer.  ``LoopWire`` is a runtime-checkable protocol: ``split`` checks a
wire against it once per process, and the driver keeps the answer, so no
``Send`` looks at the wire's attributes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from ..core.reader import Wire

__all__ = ["LoopWire", "Wire", "split"]


@runtime_checkable
class LoopWire(Protocol):
    """A wire whose writes may have to wait: ``send`` returns True/False now, or None and calls ``resume`` later."""

    def send(self, frame: bytes, resume: Callable[[bool], None]) -> bool | None: ...


def split(wire: Wire | LoopWire | None) -> tuple[LoopWire | None, Wire | None]:
    """Return ``(wire, None)`` for a ``LoopWire``, ``(None, wire)`` for an in-memory one, ``(None, None)`` for none."""
    if wire is None:
        return None, None
    if isinstance(wire, LoopWire):
        return wire, None
    return None, wire
