"""A ``TokenStreams`` app's start and stop: the ASGI lifespan, and ending streams when the server exits.

How this works: everything starts lazily (a mounted app gets no lifespan
events), so ``start`` runs at lifespan startup or at the first request, on
the server's loop, and from there listens for the server's exit signal
(``exiting``).  When it comes, open streams get ``grace_s`` to finish; then
the models still running are stopped (their readers get the early
``done``), and a moment later whatever is still open ends after the frame it
is writing, so the server, which waits for every connection before its own
shutdown, can exit.  The lifespan shutdown stops the models too, and closes
the iterators nobody read.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

from ..endpoints.decide import Endpoints, logger
from .exiting import watch_exit
from .model_maker import ModelMaker
from .wire import Receive, Send

__all__ = ["Lifecycle"]

# At the end of the shutdown grace the models are stopped; their readers get the early done within this
# (a stopped model's producer ends at once), then what is still open ends after the frame it is writing.
_LAST_FRAMES_S = 0.25


class Lifecycle:
    """Start (``start``, on the server's loop) and stop ``endpoints`` and the ``models``' streams."""

    def __init__(self, endpoints: Endpoints, models: ModelMaker | None, start: Callable[[], bool]) -> None:
        self.endpoints, self.models, self._start = endpoints, models, start
        self.exiting = False

    def start(self) -> None:
        """Start on the running loop (again if it is a new one), listening for the server's exit."""
        if self._start():
            self.exiting = False               # a new loop: a new server, which has not been told to exit
            watch_exit(self._exiting)

    async def run(self, receive: Receive, send: Send) -> None:
        """The ASGI lifespan protocol, for an app run on its own."""
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self.start()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                self.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    @contextlib.asynccontextmanager
    async def context(self) -> AsyncIterator[None]:
        """The same, as the lifespan of the app this one is mounted in."""
        self.start()
        try:
            yield
        finally:
            self.close()

    def close(self) -> None:
        """Stop every model still generating and close unread ones (``Stream.shut_down``).

        Its readers get the early ``done``, unless another process may continue the
        model (``takeover="continue"`` on Redis): that stream is handed off, and its
        readers' connections end without ``done``, to resume where it goes on.
        """
        for stream in list(self.models.streams if self.models is not None else ()):
            stream.shut_down()

    def _exiting(self) -> None:
        if not self.exiting:
            self.exiting = True
            asyncio.get_running_loop().call_later(self.endpoints.config.grace_s, self._end_streams)

    def _end_streams(self) -> None:
        self.close()
        asyncio.get_running_loop().call_later(_LAST_FRAMES_S, self._close_streams)

    def _close_streams(self) -> None:
        ended = self.endpoints.close_streams()
        if ended:
            logger.info("shutting down: %d open streams ended after their last frame; readers resume elsewhere",
                        ended)
