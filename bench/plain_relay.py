"""Item 12's plain relay: FastAPI's ``StreamingResponse`` over httpx, passing the upstream's bytes through.

It keeps nothing and resumes nothing: ``POST /v1/chat/completions`` is sent
on to ``$BENCH_UPSTREAM`` (one pooled ``httpx.AsyncClient``) and its body is
relayed as it comes.  What a relay costs at the least, for item 12 to
measure ``tokenwire proxy`` against.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

app = FastAPI()
_client = httpx.AsyncClient(timeout=httpx.Timeout(60.0, connect=5.0),
                            limits=httpx.Limits(max_connections=4096, max_keepalive_connections=4096))


@app.post("/v1/chat/completions")
async def chat_completions(request: Request) -> StreamingResponse:
    upstream = _client.build_request("POST", os.environ["BENCH_UPSTREAM"] + "/chat/completions",
                                     content=await request.body(), headers={"content-type": "application/json"})
    response = await _client.send(upstream, stream=True)

    async def body() -> AsyncIterator[bytes]:
        try:
            async for chunk in response.aiter_raw():
                yield chunk
        finally:
            await response.aclose()

    return StreamingResponse(body(), status_code=response.status_code, media_type="text/event-stream")
