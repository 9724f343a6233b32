"""The two kinds of wire a ``Send`` writes to, told apart once when a process starts.

How this works: a ``LoopWire`` (a socket's ``TransportWire``, the ASGI
adapter's ``AsgiWire``) takes a frame and answers True/False at once, or
None and calls ``resume`` with the answer later (its transport drained, timed
out or lost the peer).  An in-memory ``Wire`` (``MemoryReader``) says when it
can next accept a frame and takes it then; the driver waits for it with a
timer.  ``LoopWire`` is a runtime-checkable protocol: ``split`` checks a
wire's class against it once (a protocol's ``isinstance`` looks at every
attribute it names, tens of microseconds a call, and every connection
starts a process), and the driver keeps the answer, so no ``Send`` looks at
the wire's attributes.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Protocol, cast, runtime_checkable

from ..core.reader import Wire

__all__ = ["LoopWire", "Wire", "split"]


@runtime_checkable
class LoopWire(Protocol):
    """A wire whose writes may have to wait: ``send`` returns True/False now, or None and calls ``resume`` later."""

    def send(self, frame: bytes, resume: Callable[[bool], None]) -> bool | None: ...


# Whether a class of wire is a LoopWire, as ``isinstance`` first said for one of its instances (weakly: a class
# made on the fly, a test's, goes when nothing else holds it).
_LOOP_WIRE_CLASSES: weakref.WeakKeyDictionary[type, bool] = weakref.WeakKeyDictionary()


def split(wire: Wire | LoopWire | None) -> tuple[LoopWire | None, Wire | None]:
    """Return ``(wire, None)`` for a ``LoopWire``, ``(None, wire)`` for an in-memory one, ``(None, None)`` for none."""
    if wire is None:
        return None, None
    kind = type(wire)
    loop_wire = _LOOP_WIRE_CLASSES.get(kind)
    if loop_wire is None:
        loop_wire = _LOOP_WIRE_CLASSES[kind] = isinstance(wire, LoopWire)
    if loop_wire:
        return cast(LoopWire, wire), None
    return None, cast(Wire, wire)
