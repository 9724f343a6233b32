"""Memory the live server gives back: the allocator's free pages returned after large request bodies.

How this works: a request body arrives in the pieces the socket reads
(64 to 256 KiB each), which glibc's ``malloc`` serves from its heap rather
than from their own mappings; once they are freed, the small objects a
stream keeps (its log, its frames) pin the heap pages between them, so the
process's resident memory stays at its peak long after the bodies are gone
(three bursts of 400 near-1 MiB bodies held 1.2 GB).  Python has nothing
left to free then: only the allocator can hand the pages back, and glibc
does it in ``malloc_trim(0)``.  So each connection that read a large body
tells the ``Trimmer`` how much it read when it closes; once enough has been
released, one trim runs after a short delay (a burst ends in one trim, not
one per connection).  Where the C library has no ``malloc_trim`` (musl, macOS)
the trimmer does nothing: those allocators return freed memory themselves.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
from collections.abc import Callable

__all__ = ["LARGE_BODY", "TRIM_AFTER_BYTES", "TRIM_DELAY_S", "Trimmer", "malloc_trim"]

# A body this large arrived in several socket reads: its pieces came from the heap (glibc maps only
# allocations of 128 KiB and more, and raises that threshold as mapped blocks are freed).
LARGE_BODY = 64 * 1024
# Trim once this much body has been released since the last trim: 8 MiB is what one trim can give back
# worth its walk of the heap (about a millisecond per hundred megabytes here).
TRIM_AFTER_BYTES = 8 * 1024 * 1024
# How long after the release that crossed the mark the trim runs: the rest of a burst closes meanwhile,
# and one trim returns it all.
TRIM_DELAY_S = 1.0


def _libc_trim() -> Callable[[], None] | None:
    """glibc's ``malloc_trim(0)`` as a callable, or None where the C library has none."""
    name = ctypes.util.find_library("c")
    try:
        function = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError, TypeError):
        return None
    function.argtypes, function.restype = [ctypes.c_size_t], ctypes.c_int

    def trim() -> None:
        function(0)
    return trim


malloc_trim = _libc_trim()


class Trimmer:
    """Counts released body bytes; schedules one ``malloc_trim`` once ``TRIM_AFTER_BYTES`` are released."""

    __slots__ = ("_loop", "_pending", "_scheduled", "_trim", "trims")

    def __init__(self, loop: asyncio.AbstractEventLoop, trim: Callable[[], None] | None = malloc_trim) -> None:
        self._loop, self._trim = loop, trim
        self._pending = 0
        self._scheduled: asyncio.TimerHandle | None = None
        self.trims = 0                            # how many have run (for the tests and /metrics readers)

    def released(self, size: int) -> None:
        """A connection that read a ``size``-byte body closed."""
        if size < LARGE_BODY or self._trim is None:
            return
        self._pending += size
        if self._pending >= TRIM_AFTER_BYTES and self._scheduled is None:
            self._scheduled = self._loop.call_later(TRIM_DELAY_S, self._run)

    def _run(self) -> None:
        self._scheduled, self._pending = None, 0
        assert self._trim is not None
        self._trim()
        self.trims += 1

    def close(self) -> None:
        """Cancel a pending trim (the server is stopping)."""
        if self._scheduled is not None:
            self._scheduled.cancel()
            self._scheduled = None
