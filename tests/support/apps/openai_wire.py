"""The apps the OpenAI wire tests serve with uvicorn: the canned answer and a model that reads the OpenAI request.

``/canned``: ``TokenStreams()``, the canned answer (the report's parameters
as extra body fields).  ``/model``: ``openai_model``, which yields
``" w<i>"`` for ``i`` from ``request.start`` to the body's ``n`` - 1 (default
12), each after the body's ``delay_ms`` (default 5), and records each call
(``support.apps.parts.record``); a body with ``"fail_at": k`` raises at token k.
Both on the log ``TOKENWIRE_LOG_URL`` names (memory if unset); the model
continues a stream whose process died (``takeover="continue"``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from support.apps.parts import prefix_app, record
from tokenwire.asgi import StreamRequest, TokenStreams


def openai_model(request: StreamRequest) -> AsyncIterator[str]:
    """Tokens ``" w<start>"`` .. ``" w<n-1>"`` (the OpenAI body's ``n``), each after its ``delay_ms``."""
    body = request.openai.body if request.openai is not None else {}
    n, delay, fail_at = int(body.get("n", 12)), float(body.get("delay_ms", 5)) / 1000, body.get("fail_at")
    record(request, "openai")

    async def tokens() -> AsyncIterator[str]:
        for index in range(request.start, n):
            if index == fail_at:
                raise RuntimeError("the test model fails here")
            await asyncio.sleep(delay)
            yield f" w{index}"

    return tokens()


app = prefix_app({"/canned": TokenStreams(), "/model": TokenStreams(openai_model, takeover="continue",
                                                                     name="openai-test-model")})
