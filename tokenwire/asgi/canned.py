"""``tokenwire.asgi:app``: the canned answer's ASGI app, built on its first call, never at import.

How this works: importing ``tokenwire.asgi`` succeeds whatever the
environment holds (``from tokenwire.asgi import TokenStreams`` with a bad
``$TOKENWIRE_LOG_URL`` is a working import), so ``app`` is a small ASGI
callable that builds its ``TokenStreams`` when the server first calls it:
under uvicorn, the lifespan's start-up.  A bad setting is then
``lifespan.startup.failed`` with one line naming it, which uvicorn logs
before it exits; a server that runs no lifespan answers each request with
that line as a 503.  It serves ``GET /metrics`` when ``prometheus_client`` is
installed (``pip install 'tokenwire[metrics]'``); without it ``/metrics``
answers 404 naming the extra.
"""

from __future__ import annotations

from typing import Any

from ..endpoints.decide import refusal
from ..endpoints.exposition import metrics_installed
from ..endpoints.params import RequestError
from . import scope as asgi
from .app import TokenStreams
from .wire import Receive, Send

__all__ = ["CannedApp"]


class CannedApp:
    """An ASGI 3 app serving the canned answer on the log ``$TOKENWIRE_LOG_URL`` names (memory if unset)."""

    def __init__(self) -> None:
        self._streams: TokenStreams | None = None

    def streams(self) -> TokenStreams:
        """The ``TokenStreams`` behind this app, built on the first call; raises ``ValueError`` for a bad setting."""
        if self._streams is None:
            self._streams = TokenStreams(metrics=metrics_installed())
        return self._streams

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        try:
            streams = self.streams()
        except ValueError as exc:
            await _refuse(f"tokenwire.asgi:app: {exc}", scope, receive, send)
            return
        await streams(scope, receive, send)


async def _refuse(line: str, scope: dict[str, Any], receive: Receive, send: Send) -> None:
    """Fail the lifespan's start-up with ``line``, or answer a request with it as a 503."""
    if scope["type"] == "lifespan":
        await receive()                         # lifespan.startup: the first message of a lifespan
        await send({"type": "lifespan.startup.failed", "message": line})
        return
    answer = refusal(RequestError(503, line))
    await asgi.answer(send, answer.status, answer.headers, answer.body, head=scope.get("method") == "HEAD")
