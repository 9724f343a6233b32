"""The upstream of item 12: an OpenAI-compatible server streaming the 277-token answer, paced, as a model would.

How this works: ``POST /v1/chat/completions`` (any body) answers with
``chat.completion.chunk`` frames: a role chunk, one chunk per token of
tokenwire's canned answer (``tokens`` from the body, else ``$BENCH_UPSTREAM_TOKENS``, else all 277) sent
at absolute deadlines ``PRODUCER_MS`` apart (the body's ``producer_ms``),
a finish chunk and ``data: [DONE]``.  Raw ASGI, so the upstream costs as
little as it can; its CPU is not what item 12 measures (every relay reads
the same upstream).
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

from tokenwire.core.model import ANSWER

_HEAD = b'data: {"id":"chatcmpl-up","object":"chat.completion.chunk","created":0,"model":"bench","choices":['
_ROLE = _HEAD + b'{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n'
_END = _HEAD + b'{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'


def _token(text: str) -> bytes:
    return _HEAD + b'{"index":0,"delta":{"content":' + json.dumps(text).encode() + b'},"finish_reason":null}]}\n\n'


_TOKENS = [_token(text) for text in ANSWER]
# What a body that names no ``tokens`` gets (a relay hands the upstream no such field): the quick run's 50.
_DEFAULT_TOKENS = int(os.environ.get("BENCH_UPSTREAM_TOKENS", len(ANSWER)))


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    asked = json.loads(body or b"{}")
    tokens, period = int(asked.get("tokens", _DEFAULT_TOKENS)), float(asked.get("producer_ms", 20)) / 1000
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
    await send({"type": "http.response.body", "body": _ROLE, "more_body": True})
    loop = asyncio.get_running_loop()
    start = loop.time()
    for index in range(tokens):
        await asyncio.sleep(max(0.0, start + (index + 1) * period - loop.time()))
        await send({"type": "http.response.body", "body": _TOKENS[index], "more_body": True})
    await send({"type": "http.response.body", "body": _END})
