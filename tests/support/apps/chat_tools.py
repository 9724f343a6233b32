"""A chat model with a tool, for the AI SDK's clients reading every part; this module holds no tests.

``app`` mounts ``TokenStreams(tool_model)`` at ``/tools``.  The model yields
``ANSWER``: reasoning, text, a call of ``get_weather`` whose arguments come
in ``len(ARGUMENTS)`` pieces, the tool's result, a second step with more
text and a source, its usage and its finish reason, each part after the
body's ``delay_ms``.  ``GET /seen/<stream_id>`` answers what the model was
given for that stream: the chat's messages as a chat completion's
(``chat_messages``), the message it goes on with (``continues``) and the
body fields the AI SDK's ``body`` option adds (``model``, ``tools``).  Run by
uvicorn with ``--app-dir tests``: ``support.apps.chat_tools:app``; with
``TOKENWIRE_TEST_LOG`` set, on that token log (Redis).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI

from tokenwire.asgi import StreamRequest, TokenStreams
from tokenwire.core import parts

# The arguments of the call, in the pieces the model streams them in.
ARGUMENTS = ['{"ci', 'ty": ', '"Par', 'is"}']
ANSWER: list[str | parts.Part] = [
    parts.Reasoning("The user asks "), parts.Reasoning("about the weather."), "Let me ", "check. ",
    parts.ToolCallStart("call_1", "get_weather"), *(parts.ToolCallDelta("call_1", piece) for piece in ARGUMENTS),
    parts.ToolCallEnd("call_1", {"city": "Paris"}), parts.ToolResult("call_1", {"celsius": 21}), parts.Step(),
    "It is ", "21 degrees ", "in Paris.", parts.Source("s1", url="https://example.org/paris", title="Paris"),
    parts.Usage(34, 18, 6), parts.Finish("stop")]
SEEN: dict[str, dict[str, Any]] = {}


def tool_model(request: StreamRequest) -> AsyncIterator[str | parts.Part]:
    chat = request.chat
    if chat is None:
        raise ValueError("this model answers POST /chat only")
    delay = float(chat.body.get("delay_ms", 2)) / 1000
    SEEN[request.stream_id] = {"chat_messages": list(chat.chat_messages), "continues": chat.continues,
                               "model": chat.body.get("model"), "tools": chat.body.get("tools")}

    async def answer() -> AsyncIterator[str | parts.Part]:
        for part in ANSWER:
            await asyncio.sleep(delay)
            yield part

    return answer()


tools = TokenStreams(tool_model, log=os.environ.get("TOKENWIRE_TEST_LOG") or "memory")  # type: ignore[arg-type]
app = FastAPI(lifespan=tools.lifespan)
app.mount("/tools", tools)


@app.get("/seen/{stream_id}")
async def seen_of(stream_id: str) -> dict[str, Any]:
    return SEEN.get(stream_id, {})
