"""A small OpenAI-compatible model server for the proxy tests: streamed chat completions, and every way to fail.

``POST /v1/chat/completions`` (always streamed, as tokenwire asks): the
``model`` field says what to do, as ``key=value`` pairs joined by ``,``:
``n`` tokens (default 12) ``" u<i>"``, each after ``delay_ms`` (default 2),
and ``fail``: ``status`` (a 500 with a JSON error), ``auth`` (a 401 unless
the ``Authorization`` header is ``Bearer <$STANDIN_KEY>``: then it answers),
``stall`` (a role chunk, 2 tokens, then nothing), ``malformed`` (2 tokens,
then a frame that is not JSON), ``error_frame`` (2 tokens, then
``{"error": ...}``), ``cut`` (2 tokens, then the connection closes without
``[DONE]``).  A request whose last message is the assistant's partial turn
with ``continue_final_message`` continues it: it counts the ``u`` tokens the
prefix holds and goes on from there.  Each request is one JSON line in the
file ``$STANDIN_CALLS`` (if set): its messages, its flags, its pid.
``GET /v1/models`` lists ``standin``.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any


def _options(model: str) -> dict[str, str]:
    return dict(pair.split("=", 1) for pair in model.split(",") if "=" in pair)


def _chunk(content: str | None = None, finish: str | None = None, role: bool = False) -> bytes:
    delta: dict[str, Any] = {"role": "assistant", "content": ""} if role else {}
    if content is not None:
        delta["content"] = content
    body = {"id": "chatcmpl-standin", "object": "chat.completion.chunk", "created": 0, "model": "standin",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(body)}\n\n".encode()


def _record(body: dict[str, Any], headers: dict[str, str]) -> None:
    calls = os.environ.get("STANDIN_CALLS")
    if calls:
        line = {"messages": body.get("messages"), "continue_final_message": body.get("continue_final_message"),
                "add_generation_prompt": body.get("add_generation_prompt"), "model": body.get("model"),
                "max_tokens": body.get("max_tokens"), "pid": os.getpid()}
        with open(calls, "a") as out:
            out.write(json.dumps(line) + "\n")


async def _read_body(receive: Any) -> bytes:
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


async def _send_json(send: Any, status: int, value: object) -> None:
    data = json.dumps(value).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
    await send({"type": "http.response.body", "body": data})


def _start(messages: list[dict[str, Any]], body: dict[str, Any]) -> int:
    last = messages[-1] if messages else {}
    if body.get("continue_final_message") and last.get("role") == "assistant":
        return str(last.get("content", "")).count(" u")
    return 0


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    if scope["path"] == "/v1/models":
        await _send_json(send, 200, {"object": "list", "data": [{"id": "standin", "object": "model"}]})
        return
    body = json.loads(await _read_body(receive))
    headers = {k.decode(): v.decode() for k, v in scope["headers"]}
    _record(body, headers)
    options = _options(str(body.get("model", "")))
    fail = options.get("fail")
    if fail == "status" or (fail == "auth" and headers.get("authorization") != f"Bearer {os.environ['STANDIN_KEY']}"):
        status = 500 if fail == "status" else 401
        await _send_json(send, status, {"error": {"message": f"stand-in {fail}", "type": "server_error"}})
        return
    n, delay = int(options.get("n", 12)), float(options.get("delay_ms", 2)) / 1000
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})

    async def out(data: bytes) -> None:
        await send({"type": "http.response.body", "body": data, "more_body": True})

    await out(_chunk(role=True))
    for index in range(_start(body.get("messages") or [], body), n):
        if index == 2 and fail in ("stall", "malformed", "error_frame", "cut"):
            if fail == "stall":
                await asyncio.sleep(3600)
            if fail == "malformed":
                await out(b"data: {not json\n\n")
            if fail == "error_frame":
                await out(b'data: {"error": {"message": "the stand-in broke", "type": "server_error"}}\n\n')
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        await asyncio.sleep(delay)
        await out(_chunk(f" u{index}"))
    await out(_chunk(finish="stop"))
    await out(b"data: [DONE]\n\n")
    await send({"type": "http.response.body", "body": b"", "more_body": False})
