"""A core stream served to a reader on a private event-loop driver of its own thread, as each connection of a
shared-log test runs (so instances run side by side in one process); no tests here.

``connect(stream, reader, cursor, results)`` starts one connection of ``reader`` to ``stream`` from ``cursor``
and returns it ``Running``: ``join(timeout_s)`` waits for it, bounded, and raises what it raised.
"""

from __future__ import annotations

import threading
from typing import Any

from tokenwire.realtime import LoopDriver


class Running:
    """A private event-loop driver running on its own thread; ``join`` waits for it and raises its error."""

    def __init__(self, driver: LoopDriver) -> None:
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, args=(driver,), daemon=True)
        self.thread.start()

    def _run(self, driver: LoopDriver) -> None:
        try:
            driver.run()
        except BaseException as exc:   # surfaced by join()
            self.errors.append(exc)

    def join(self, timeout_s: float) -> None:
        self.thread.join(timeout_s)
        if self.thread.is_alive():
            raise TimeoutError(f"the connection still runs after {timeout_s} s")
        if self.errors:
            raise self.errors[0]


def connect(stream: Any, reader: Any, cursor: int, results: list[Any]) -> Running:
    """Start one connection of ``reader`` to ``stream`` from ``cursor``; returns its running driver."""
    driver = LoopDriver.private()
    reader.begin_connection()

    def client() -> Any:
        results.append((yield from stream.serve(cursor, stream.new_channel())))
    driver.spawn(client(), reader)
    return Running(driver)
