"""The apps the ASGI tests serve with uvicorn; this module holds no tests.

``app`` is a FastAPI app that mounts ``TokenStreams`` with a fake async
model under ``/tokens`` (``detach``, the default) and ``/cancel`` (``cancel``),
and answers ``GET /model/<stream_id>`` with what the model did for that
stream: steps started, tokens yielded, whether it finished and whether it
was closed.  The fake model is steered by its query parameters:

- ``n`` tokens (``" t0"``, ``" t1"``, ...), each after ``delay_ms``
  (``POST /chat``: the body's fields);
- ``mode``: ``ok``; ``raise`` (a ``RuntimeError`` carrying a secret at token
  ``at``); ``nonstr`` (yields the int 42 at token ``at``); ``never`` (never
  yields anything).

``/canned`` mounts the canned answer (``TokenStreams()``).  Run by uvicorn with ``--app-dir tests``:
``support.apps.fake_model:app``.  ``support.apps.fake_model:live`` is the live page (``HostedLive``) with the
fake model, at the root.
With ``TOKENWIRE_TEST_LOG`` set, the mounted apps use that token log (Redis).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI

from tokenwire.asgi import StreamRequest, TokenStreams
from tokenwire.asgi.hosted import HostedLive

SECRET = "do-not-leak-4711"
STATS: dict[str, dict[str, Any]] = {}


async def fake_model(request: StreamRequest) -> AsyncIterator[str]:
    """An async factory (as an async client call is): returns the async generator of tokens."""
    params = request.chat.body if request.chat is not None else request.params     # POST /chat: the body's fields
    n, at = int(params.get("n", "20")), int(params.get("at", "3"))
    delay = float(params.get("delay_ms", "5")) / 1000
    mode = params.get("mode", "ok")
    if mode not in ("ok", "raise", "nonstr", "never"):
        raise ValueError(f"mode must be ok, raise, nonstr or never, got {mode!r}")
    stats = STATS[request.stream_id] = {"steps": 0, "yielded": 0, "finished": False, "closed": False}

    async def tokens() -> AsyncIterator[Any]:
        try:
            for index in range(n):
                stats["steps"] += 1
                if mode == "never":
                    await asyncio.Event().wait()
                await asyncio.sleep(delay)
                if mode == "raise" and index == at:
                    raise RuntimeError(f"upstream failed with key {SECRET}")
                stats["yielded"] += 1
                yield 42 if mode == "nonstr" and index == at else f" t{index}"
            stats["finished"] = True
        finally:
            stats["closed"] = True

    return tokens()


_LOG = os.environ.get("TOKENWIRE_TEST_LOG") or "memory"
_HEARTBEAT_S = float(os.environ.get("TOKENWIRE_TEST_HEARTBEAT_S", "15"))
detached = TokenStreams(fake_model, log=_LOG, heartbeat_s=_HEARTBEAT_S)
cancelled = TokenStreams(fake_model, log=_LOG, on_disconnect="cancel", heartbeat_s=_HEARTBEAT_S)


@contextlib.asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    async with detached.lifespan(), cancelled.lifespan():
        yield


app = FastAPI(lifespan=_lifespan)
app.mount("/tokens", detached)
app.mount("/cancel", cancelled)
app.mount("/canned", TokenStreams())          # the canned answer, mounted


# The live page reading the fake model (its script POSTs /streams at the root).
live = HostedLive(TokenStreams(fake_model, log=_LOG, heartbeat_s=_HEARTBEAT_S))


@app.get("/model/{stream_id}")
async def model_stats(stream_id: str) -> dict[str, Any]:
    return STATS.get(stream_id, {})
