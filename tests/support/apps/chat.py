"""The apps the chat tests serve with uvicorn; this module holds no tests.

``app`` mounts ``TokenStreams`` with a chat model under ``/model`` and the
canned answer under ``/canned``, and answers ``GET /seen/<stream_id>`` with
what the model was given and did for that stream: the chat id, how many
messages, the trigger, tokens yielded, whether it finished and whether its
iterator was closed.  The model reads its settings from the chat body's
own fields: ``n`` tokens (``" t0"``, ``" t1"``, ...), each after
``delay_ms``; ``mode`` ``ok`` or ``raise`` (a ``RuntimeError`` carrying a
secret at token ``at``).  Run by uvicorn with ``--app-dir tests``:
``support.apps.chat:app``.  With ``TOKENWIRE_TEST_LOG`` set, both use that token log (Redis).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI

from tokenwire.asgi import StreamRequest, TokenStreams

SECRET = "chat-secret-0815"
SEEN: dict[str, dict[str, Any]] = {}


def chat_model(request: StreamRequest) -> AsyncIterator[str]:
    chat = request.chat
    if chat is None:
        raise ValueError("this model answers POST /chat only")
    body = chat.body
    n, at, delay = int(body.get("n", 20)), int(body.get("at", 3)), float(body.get("delay_ms", 5)) / 1000
    seen = SEEN[request.stream_id] = {"chat_id": chat.chat_id, "messages": len(chat.messages),
                                      "trigger": chat.trigger, "yielded": 0, "finished": False, "closed": False}

    async def tokens() -> AsyncIterator[str]:
        try:
            for index in range(n):
                await asyncio.sleep(delay)
                if body.get("mode") == "raise" and index == at:
                    raise RuntimeError(f"upstream failed with key {SECRET}")
                seen["yielded"] += 1
                yield f" t{index}"
            seen["finished"] = True
        finally:
            seen["closed"] = True

    return tokens()


_LOG = os.environ.get("TOKENWIRE_TEST_LOG") or "memory"
model = TokenStreams(chat_model, log=_LOG)
canned = TokenStreams(log=_LOG)


@contextlib.asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    async with contextlib.AsyncExitStack() as started:
        for streams in (model, canned):
            await started.enter_async_context(streams.lifespan())
        yield


app = FastAPI(lifespan=_lifespan)
app.mount("/model", model)
app.mount("/canned", canned)


@app.get("/seen/{stream_id}")
async def seen_of(stream_id: str) -> dict[str, Any]:
    return SEEN.get(stream_id, {})
