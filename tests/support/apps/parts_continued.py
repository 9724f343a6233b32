"""A model that yields typed parts, continued by another process (``takeover="continue"``); holds no tests.

``app`` is ``TokenStreams(model, takeover="continue")`` on the log ``TOKENWIRE_TEST_LOG`` names.  The query's
``shape`` says what the answer is, each part after ``delay_ms`` (default 30), from ``request.start`` on:

- ``reasoning``: ``n`` (default 60) reasoning pieces ``" r<i>"``, then the text ``" done"``: killed in the
  reasoning, it may be continued from the logged prefix;
- ``tool``: the text ``"Let me check. "``, then ``get_weather``'s call with ``n`` argument pieces: killed in the
  arguments, it ends inside a tool call;
- ``awaiting``: the text, ``get_weather``'s whole call, then a wait of ``n`` steps for a result that never comes.

Each call of the factory appends one JSON line to ``TOKENWIRE_TEST_CALLS``: the pid, ``start``, the prefix's
kinds and its text (``StreamRequest.prefix_text``).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from typing import Any

from tokenwire.asgi import StreamRequest, TokenStreams
from tokenwire.core.parts import Part, Reasoning, ToolCallDelta, ToolCallEnd, ToolCallStart

_LOG = os.environ.get("TOKENWIRE_TEST_LOG") or "memory"


def _record(request: StreamRequest) -> None:
    calls_file = os.environ.get("TOKENWIRE_TEST_CALLS")
    if calls_file is None:
        return
    kinds = ["text" if isinstance(part, str) else part.kind for part in request.prefix]
    line = json.dumps({"stream_id": request.stream_id, "pid": os.getpid(), "start": request.start,
                       "kinds": kinds, "prefix_text": request.prefix_text,
                       "reasoning": [part.text for part in request.prefix if isinstance(part, Reasoning)]})
    with open(calls_file, "a") as calls:
        calls.write(line + "\n")


def answer(shape: str, n: int) -> list[str | Part]:
    """Every part of the answer ``shape`` with ``n`` (see the module)."""
    if shape == "reasoning":
        return [*(Reasoning(f" r{i}") for i in range(n)), " done"]
    call: list[str | Part] = ["Let me check. ", ToolCallStart("call_1", "get_weather")]
    if shape == "tool":
        return [*call, *(ToolCallDelta("call_1", " " if i else '{"city": "Paris"}') for i in range(n))]
    return [*call, ToolCallDelta("call_1", '{"city": "Paris"}'), ToolCallEnd("call_1", {"city": "Paris"})]


def model(request: StreamRequest) -> AsyncIterator[Any]:
    shape, n = request.params.get("shape", "reasoning"), int(request.params.get("n", "60"))
    delay = float(request.params.get("delay_ms", "30")) / 1000
    _record(request)

    async def parts() -> AsyncIterator[Any]:
        for part in answer(shape, n)[request.start:]:
            await asyncio.sleep(delay)
            yield part
        if shape == "awaiting":
            await asyncio.sleep(delay * n)             # the tool's result never comes

    return parts()


app = TokenStreams(model, log=_LOG, takeover="continue", grace_s=1)
