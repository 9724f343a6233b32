"""A small OpenAI-compatible model server for the proxy tests: streamed chat completions, and every way to fail.

``POST /v1/chat/completions`` (always streamed, as tokenwire asks): the
``model`` field says what to do, as ``key=value`` pairs joined by ``,``:
``n`` tokens (default 12) ``" u<i>"``, each after ``delay_ms`` (default 2),
and ``fail``: ``status`` (a 500 with a JSON error), ``auth`` (a 401 unless
the ``Authorization`` header is ``Bearer <$STANDIN_KEY>``: then it answers),
``stall`` (a role chunk, 2 tokens, then nothing), ``malformed`` (2 tokens,
then a frame that is not JSON), ``error_frame`` (2 tokens, then
``{"error": ...}``), ``cut`` (2 tokens, then the connection closes without
``[DONE]``).  ``style=vllm`` streams a typed answer as vLLM does: a role
chunk, ``delta.reasoning`` in two pieces, the text ``"Let me check the
weather. "``, a tool call ``get_weather({"city": "Paris"})`` in pieces by
index (the id and the name in the first), ``finish_reason: "tool_calls"`` and,
under ``stream_options.include_usage``, a usage chunk (34 tokens);
``style=sglang`` the same with ``delta.reasoning_content``; ``style=choices``
two choices (index 0 and 1) interleaved, as an upstream asked for ``n: 2``
sends them.  A request whose last message is the assistant's partial turn
with ``continue_final_message`` continues it: it counts the ``u`` tokens the
prefix holds and goes on from there.  Each request is one JSON line in the
file ``$STANDIN_CALLS`` (if set): its messages, its flags, its pid, and its
whole body (``body``).
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


def _frame(choices: list[dict[str, Any]], usage: dict[str, Any] | None = None) -> bytes:
    body: dict[str, Any] = {"id": "chatcmpl-standin", "object": "chat.completion.chunk", "created": 0,
                            "model": "standin", "choices": choices}
    if usage is not None:
        body["usage"] = usage
    return f"data: {json.dumps(body)}\n\n".encode()


def _delta(delta: dict[str, Any], finish: str | None = None, index: int = 0) -> dict[str, Any]:
    return {"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}


# What the typed answer says, and costs.
TEXT = "Let me check the weather. "
REASONING = ("The user asks for the weather; ", "I should call get_weather.")
CALL_ID, ARGUMENTS = "chatcmpl-tool-7b3e", ('{"city": ', '"Paris"}')
USAGE = {"prompt_tokens": 20, "completion_tokens": 14, "total_tokens": 34,
         "completion_tokens_details": {"reasoning_tokens": 6}}


def _typed(reasoning_field: str) -> Any:
    def frames(usage: bool) -> list[bytes]:
        first = {"index": 0, "id": CALL_ID, "type": "function", "function": {"name": "get_weather", "arguments": ""}}
        out = [_frame([_delta({"role": "assistant", "content": ""})]),
               *(_frame([_delta({reasoning_field: piece})]) for piece in REASONING),
               _frame([_delta({"content": TEXT})]), _frame([_delta({"tool_calls": [first]})]),
               *(_frame([_delta({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})])
                 for piece in ARGUMENTS),
               _frame([_delta({}, "tool_calls")])]
        return [*out, *([_frame([], USAGE)] if usage else []), b"data: [DONE]\n\n"]
    return frames


def _choices(usage: bool) -> list[bytes]:
    words = [(" Let", " LET"), (" me", " ME"), (" check", " CHECK")]
    out = [_frame([_delta({"role": "assistant", "content": ""}, index=i)]) for i in (0, 1)]
    out += [_frame([_delta({"content": word}, index=i)]) for pair in words for i, word in enumerate(pair)]
    return [*out, *(_frame([_delta({}, "stop", i)]) for i in (0, 1)), b"data: [DONE]\n\n"]


TYPED = {"vllm": _typed("reasoning"), "sglang": _typed("reasoning_content"), "choices": _choices}


def _record(body: dict[str, Any], headers: dict[str, str]) -> None:
    calls = os.environ.get("STANDIN_CALLS")
    if calls:
        line = {"messages": body.get("messages"), "continue_final_message": body.get("continue_final_message"),
                "add_generation_prompt": body.get("add_generation_prompt"), "model": body.get("model"),
                "max_tokens": body.get("max_tokens"), "pid": os.getpid(), "body": body}
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

    if options.get("style") in TYPED:
        usage = bool((body.get("stream_options") or {}).get("include_usage"))
        for data in TYPED[options["style"]](usage):
            await asyncio.sleep(delay)
            await out(data)
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        return
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
