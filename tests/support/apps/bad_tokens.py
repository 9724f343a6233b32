"""The app the bad-token tests serve with uvicorn (``support.apps.bad_tokens:app``); this module holds no tests.

``TokenStreams`` mounted under ``/tokens`` with a model that yields ``n``
tokens (``" t0"``, ``" t1"``, ...) and, at token ``at``, the ``str``
``"bad\\ud800"`` (a lone surrogate: no UTF-8 encoding exists for it).
``GET /model/<stream_id>`` says how many tokens the model yielded and
whether it was closed.  With ``TOKENWIRE_TEST_LOG`` set, the log is that
(Redis).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI

from tokenwire.asgi import StreamRequest, TokenStreams

BAD_TOKEN = "bad\ud800"
STATS: dict[str, dict[str, Any]] = {}


def surrogate_model(request: StreamRequest) -> AsyncIterator[str]:
    n, at = int(request.params.get("n", "6")), int(request.params.get("at", "2"))
    stats = STATS[request.stream_id] = {"yielded": 0, "closed": False}

    async def tokens() -> AsyncIterator[str]:
        try:
            for index in range(n):
                await asyncio.sleep(0.001)
                stats["yielded"] += 1
                yield BAD_TOKEN if index == at else f" t{index}"
        finally:
            stats["closed"] = True

    return tokens()


streams = TokenStreams(surrogate_model, log=os.environ.get("TOKENWIRE_TEST_LOG") or "memory")
app = FastAPI(lifespan=streams.lifespan)
app.mount("/tokens", streams)


@app.get("/model/{stream_id}")
async def model_stats(stream_id: str) -> dict[str, Any]:
    return STATS.get(stream_id, {})
