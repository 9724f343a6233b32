"""A ``TokenStreams`` app's start and stop: the ASGI lifespan, and ending streams when the server exits.

How this works: everything starts lazily (a mounted app gets no lifespan
events), so ``start`` runs at lifespan startup or at the first request, on
the server's loop, and from there listens for the server's exit signal
(``exiting``).  When it comes, open streams get ``grace_s`` to finish; then
the models still running are stopped (their readers get the early
``done``), and a moment later whatever is still open ends after the frame it
is writing, so the server, which waits for every connection before its own
shutdown, can exit.  The lifespan shutdown stops the models too, and closes
the iterators nobody read.  On a Redis log the startup first asks Redis
whether the log's user may run every command it needs
(``AsyncRedisLog.check_acl``): if not, the startup fails with the line that
names them (uvicorn says it and exits); an app with no lifespan says it on
its log at its first request.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

from ..core.tokenlog import LogUnavailable
from ..endpoints.decide import Endpoints, logger
from ..redislog.acl import NotPermitted
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
        self._checks: set[asyncio.Task[None]] = set()     # first-use ACL checks running (held: tasks are weak)

    def start(self) -> None:
        """Start on the running loop (again if it is a new one), listening for the server's exit."""
        if self._start():
            self.exiting = False               # a new loop: a new server, which has not been told to exit
            watch_exit(self._exiting)
            aio = self.endpoints.registry.aio
            if aio is not None and not aio.permitted:     # no startup checked it (no lifespan): say it at least
                task = asyncio.get_running_loop().create_task(aio.say_acl())
                self._checks.add(task)
                task.add_done_callback(self._checks.discard)

    async def refusal(self) -> str | None:
        """Why this app must not start (Redis refuses the log's user a command it needs); None if it may."""
        aio = self.endpoints.registry.aio
        if aio is None or aio.permitted:
            return None
        try:
            await aio.check_acl()
        except NotPermitted as exc:
            return str(exc)
        except LogUnavailable as exc:         # away now: the endpoints answer 503 until it is back
            logger.warning("cannot reach the token log now; starting anyway: %s", exc)
        return None

    async def run(self, receive: Receive, send: Send) -> None:
        """The ASGI lifespan protocol, for an app run on its own."""
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                refusal = await self.refusal()
                if refusal is not None:
                    await send({"type": "lifespan.startup.failed", "message": refusal})
                    return
                self.start()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                self.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    @contextlib.asynccontextmanager
    async def context(self) -> AsyncIterator[None]:
        """The same, as the lifespan of the app this one is mounted in; raises ``NotPermitted`` for a Redis that
        refuses the log's user a command it needs."""
        refusal = await self.refusal()
        if refusal is not None:
            raise NotPermitted(refusal)
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
