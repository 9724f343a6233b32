"""The hosted live page: ``/live``, its two files and the live routes as one ASGI app (``api/live.py`` on Vercel).

How this works: ``HostedLive`` answers ``GET /live`` and ``/static/live.{js,css}``
with the endpoints' page (``endpoints.page``: the same bytes ``tokenwire
serve`` sends) and hands every other request to a ``TokenStreams`` serving
the canned answer on the token log ``$TOKENWIRE_LOG_URL`` names.  On a
serverless platform each request may reach a different instance, and an
instance may be frozen or killed after its response: only a log every
instance shares (Redis: ``redis://``, ``rediss://`` or a sentinels' URL) lets a stream move
between them, so without one the page and the live routes answer ``503``
with one line naming the setting, never a stream that could not be resumed.
Vercel may hand the function its own path (``/api/live``); it is the page.
"""

from __future__ import annotations

import logging
import os
import re
from typing import Any

from ..endpoints.config import MAX_DURATION_ENV, LiveConfig
from ..endpoints.decide import refusal
from ..endpoints.decisions import Answer
from ..endpoints.page import page_answer
from ..endpoints.params import RequestError
from ..redislog.schemes import REDIS_SCHEMES, either
from ..redislog.streams import LOG_URL_ENV
from . import scope as asgi
from .app import TokenStreams
from .wire import Receive, Send

__all__ = ["HostedLive", "hosted_app", "missing_log"]

logger = logging.getLogger("tokenwire")

# The log schemes a deployment of several instances can share.
SHARED_SCHEMES = tuple(scheme for scheme in REDIS_SCHEMES if scheme != "unix://")
# How a refusal names them.
_SHARED = f"a {either(SHARED_SCHEMES)} URL"
# The function's own path on Vercel (api/live.py): served as the page.
FUNCTION_PATH = "/api/live"
# A URL scheme (RFC 3986): what a refusal may quote of a log URL that is not a shared one.
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,15}")


def missing_log(url: str | None) -> str | None:
    """Why ``url`` (``$TOKENWIRE_LOG_URL``) cannot carry streams between instances; None if it can."""
    if not url:
        return f"the live page needs a token log every instance shares: set {LOG_URL_ENV} to {_SHARED} (it is not set)"
    if not url.startswith(SHARED_SCHEMES):      # said to any client: the scheme at most, never the rest
        scheme, sep, _ = url.partition("://")
        got = f"got one starting {scheme!r}" if sep and _SCHEME.fullmatch(scheme) else "got something else"
        return f"the live page needs a token log every instance shares: {LOG_URL_ENV} must be {_SHARED}, {got}"
    return None


class HostedLive:
    """``/live``, its files and the live routes of ``streams``; ``unavailable``: the 503's message (no log)."""

    def __init__(self, streams: TokenStreams | None, unavailable: str | None = None) -> None:
        if (streams is None) == (unavailable is None):
            raise ValueError("give either the streams or why there are none, not both")
        self.streams, self.unavailable = streams, unavailable
        self.config = streams.config if streams is not None else LiveConfig()

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(scope, receive, send)
            return
        path = asgi.route_path(scope)
        path = "/live" if path == FUNCTION_PATH else path
        if self.unavailable is not None and not path.startswith("/static/"):
            await _send(send, refusal(RequestError(503, self.unavailable)), scope)
        elif (page := page_answer(path, str(scope["method"]), self.config)) is not None:
            await _send(send, page, scope)
        elif self.streams is not None:
            await self.streams(scope, receive, send)

    async def _lifespan(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if self.streams is not None:
            await self.streams(scope, receive, send)
            return
        while True:                              # nothing to start or stop
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return


async def _send(send: Send, answer: Answer, scope: dict[str, Any]) -> None:
    """Send ``answer``; a ``HEAD`` gets the headers (and the length) ``GET`` would, without the body."""
    await asgi.answer(send, answer.status, answer.headers, answer.body, head=scope.get("method") == "HEAD")


def hosted_app(environ: dict[str, str] | None = None) -> HostedLive:
    """The hosted app for ``environ`` (``os.environ``): the canned answer on ``$TOKENWIRE_LOG_URL``, or the 503s.

    ``$TOKENWIRE_MAX_DURATION_S`` ends each connection before the platform's limit (``TokenStreams``).
    """
    url = (os.environ if environ is None else environ).get(LOG_URL_ENV)
    why = missing_log(url)
    if why is not None:
        return HostedLive(None, why)
    try:
        return HostedLive(TokenStreams(log=url))
    except ValueError as exc:     # a log URL redis cannot use (a port that is not one), a bad max duration
        logger.error("tokenwire live: %s", exc)       # the operator's account: the host, the password hidden
        return HostedLive(None, f"the live page cannot start with its settings ({LOG_URL_ENV}, "
                                f"{MAX_DURATION_ENV}): the function's log says which is wrong")
