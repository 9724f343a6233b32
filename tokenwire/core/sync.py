"""The stream's condition in single-threaded runs: counts notifications and can ring a driver.

How this works: the stream and the token log guard their state with a
condition, and every change that a waiting process could care about calls
``notify_all``.  Every driver now runs all of a stream's processes on one
thread (the simulation on the virtual clock, the event loop in real time),
where a real lock protects nothing, so the condition is this do-nothing
stand-in.  ``notify_all`` counts (the simulation retries a parked process
only after a notification, since nothing it waits for can have changed
without one) and calls ``hook`` when a driver has set one (the event-loop
driver sets it when a process parks on the stream, to retry it in the
loop).  ``wait`` raises: in one thread, waiting for a notification would be
waiting forever (drivers park processes instead of blocking).
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType

__all__ = ["SingleThread"]


class SingleThread:
    """Context-manager and condition methods that only count notifications and call ``hook``."""

    __slots__ = ("hook", "notified")

    def __init__(self) -> None:
        self.notified = 0
        self.hook: Callable[[], None] | None = None

    def __enter__(self) -> bool:
        return True

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        return None

    def notify_all(self) -> None:
        self.notified += 1
        if self.hook is not None:
            self.hook()

    def wait(self, timeout: float | None = None) -> bool:
        raise RuntimeError("wait() in a single-threaded run would block forever")
