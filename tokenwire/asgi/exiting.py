"""Hearing that the ASGI server is exiting, before it waits for our streams to close.

How this works: on SIGTERM or SIGINT uvicorn stops accepting and then waits
for every open connection to close before it runs the lifespan shutdown, so
an app that holds event streams open must end them itself, or the server
never exits (sse-starlette's issue #8).  ``watch_exit`` puts a handler in
front of the one the server installed for each signal (``signal.signal``,
which only the main thread may call: elsewhere it does nothing): it tells
the app on its loop, then hands the signal on exactly as before, so the
server's own shutdown proceeds unchanged.  A server that restores its
handlers when it stops removes this one with them.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable
from types import FrameType

__all__ = ["EXIT_SIGNALS", "watch_exit"]

EXIT_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def watch_exit(on_exit: Callable[[], None]) -> bool:
    """Call ``on_exit`` on the running loop when an exit signal arrives; False if it cannot listen here."""
    if threading.current_thread() is not threading.main_thread():
        return False
    loop = asyncio.get_running_loop()
    listening = False
    for sig in EXIT_SIGNALS:
        previous = signal.getsignal(sig)
        if previous is None or previous == signal.SIG_IGN:
            continue               # installed outside Python (it could not be handed on), or the signal is ignored
        signal.signal(sig, _chained(loop, on_exit, previous))
        listening = True
    return listening


def _chained(loop: asyncio.AbstractEventLoop, on_exit: Callable[[], None],
             previous: Callable[[int, FrameType | None], object] | int | signal.Handlers | None,
             ) -> Callable[[int, FrameType | None], None]:
    def handler(signum: int, frame: FrameType | None) -> None:
        if not loop.is_closed():
            loop.call_soon_threadsafe(on_exit)
        if callable(previous):
            previous(signum, frame)
        elif previous == signal.SIG_DFL:         # nobody else listens: the signal does what it always did
            signal.signal(signum, signal.SIG_DFL)
            signal.raise_signal(signum)
    return handler
