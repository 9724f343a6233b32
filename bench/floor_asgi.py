"""The floor for ``uvicorn tokenwire.asgi:app``: a bare ASGI callable sending preformatted SSE frames on timers.

``uvicorn bench.floor_asgi:app``: each request gets one ``event: token`` body
chunk per 20 ms (``tokens`` from the query, as item 5's client asks), then
``event: done``; nothing else is done per token, so its CPU per token is
what uvicorn, the event loop and the socket cost.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs

STEP_S = 0.020  # item 5's pacing: 20 ms per token
HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]


async def app(scope: dict[str, Any], receive: Callable[[], Awaitable[Any]],
              send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
    """Send the head, then the frames on a timer, then the done frame."""
    if scope["type"] != "http":
        return
    tokens = int(parse_qs(scope["query_string"].decode()).get("tokens", ["277"])[0])
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    for i in range(tokens):
        await asyncio.sleep(STEP_S)
        await send({"type": "http.response.body", "body": b"event: token\nid: %d\ndata: t\n\n" % i, "more_body": True})
    await send({"type": "http.response.body", "body": b"event: done\ndata: {}\n\n"})
