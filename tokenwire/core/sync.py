"""A do-nothing stand-in for ``threading.Condition`` in single-threaded runs.

How this works: the stream and the token log guard their state with a
condition or lock because the real-time drivers run them on several threads.
The virtual-clock simulation runs everything on one thread, where a real
lock costs time on every channel operation and protects nothing, so it
passes ``SingleThread()`` instead.  ``wait`` raises: in one thread, waiting
for a notification would be waiting forever (the simulation parks processes
instead of blocking).  ``notify_all`` only counts: the simulation retries a
parked process only after a notification, since nothing it waits for can
have changed without one.
"""

from __future__ import annotations

from types import TracebackType

__all__ = ["SingleThread"]


class SingleThread:
    """Context-manager and condition methods that do nothing but count notifications."""

    __slots__ = ("notified",)

    def __init__(self) -> None:
        self.notified = 0

    def __enter__(self) -> bool:
        return True

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        return None

    def notify_all(self) -> None:
        self.notified += 1

    def wait(self, timeout: float | None = None) -> bool:
        raise RuntimeError("wait() in a single-threaded run would block forever")
