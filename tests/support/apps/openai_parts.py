"""A model that answers with typed parts through OpenAI's wire, for the openai SDK; this module holds no tests.

``app`` is ``TokenStreams(parts_model)``.  The model yields ``ANSWER``, as
vLLM streams a call: reasoning, the text "Let me check the weather. ", a
call of ``get_weather`` whose arguments come in ``len(ARGUMENTS)`` pieces
and its usage, with no finish part (so the last step's call makes the
finish reason ``tool_calls``); each part after the OpenAI body's
``delay_ms`` (default 2).  On the log ``TOKENWIRE_LOG_URL`` names (memory
if unset).  Run by uvicorn with ``--app-dir tests``: ``support.apps.openai_parts:app``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from tokenwire.asgi import StreamRequest, TokenStreams
from tokenwire.core import parts

# The call's arguments, in the pieces the model streams them in.
ARGUMENTS = ['{"ci', 'ty": ', '"Par', 'is"}']
TEXT = ["Let me ", "check the weather. "]
ANSWER: list[str | parts.Part] = [
    parts.Reasoning("The user asks "), parts.Reasoning("about the weather."), *TEXT,
    parts.ToolCallStart("call_1", "get_weather"), *(parts.ToolCallDelta("call_1", piece) for piece in ARGUMENTS),
    parts.ToolCallEnd("call_1", {"city": "Paris"}), parts.Usage(34, 12, 5)]


def parts_model(request: StreamRequest) -> AsyncIterator[str | parts.Part]:
    """``ANSWER``, each part after the body's ``delay_ms``."""
    body = request.openai.body if request.openai is not None else {}
    delay = float(body.get("delay_ms", 2)) / 1000

    async def answer() -> AsyncIterator[str | parts.Part]:
        for part in ANSWER:
            await asyncio.sleep(delay)
            yield part

    return answer()


app = TokenStreams(parts_model, name="openai-parts-model")
