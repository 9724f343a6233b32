"""``tokenwire serve`` with no model shows every part in every dialect: ``?parts=tools`` (a body field on
``/chat`` and ``/v1``) makes the canned answer reason, write text, call get_weather with its arguments in pieces,
get the result and write the answer in a second step, read here as tokenwire's frames, the AI SDK's chunks and,
with the real openai SDK, chat chunks and Responses events; a bad value is each route's own 400 naming it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from support.served import Served, served

# Far more than a 5-token answer at 1 ms a step takes.
TIMEOUT_S = 20
FAST = {"parts": "tools", "tokens": 5, "producer_ms": 1}
QUERY = "parts=tools&tokens=5&producer_ms=1"
TEXT = ("Let me check the weather first. It is 18 degrees and sunny in Paris. Now, the answer.\n\n"
        "A streaming inference server produces")
ASK: Any = [{"role": "user", "content": "What should happen when the consumer is slower?"}]
CHAT = {"messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "slow readers?"}]}], **FAST}
BAD = "parts must be one of text, tools; got 'images'"


@pytest.fixture(scope="module")
def server() -> Iterator[Served]:
    with served() as running:
        yield running


def url(server: Served) -> str:
    return f"http://127.0.0.1:{server.port}"


def _sse(text: str) -> list[tuple[str, str]]:
    events = []
    for block in text.split("\n\n"):
        lines = [line for line in block.split("\n") if line and not line.startswith(":")]
        if lines:
            name = next((line[7:] for line in lines if line.startswith("event: ")), "message")
            events.append((name, "\n".join(line[6:] for line in lines if line.startswith("data: "))))
    return events


def test_the_frames_carry_every_part(server: Served) -> None:
    got = httpx.get(f"{url(server)}/stream?{QUERY}", timeout=TIMEOUT_S)
    events = _sse(got.text)
    names = [name for name, _ in events if name not in ("open", "done")]
    assert names[:4] == ["reasoning"] * 4 and names[-2:] == ["usage", "finish"]
    assert names[11:19] == ["tool-call-start", *["tool-call-delta"] * 4, "tool-call-end", "tool-result", "step"]
    assert "".join(data for name, data in events if name == "token") == TEXT
    result = next(json.loads(data) for name, data in events if name == "tool-result")
    assert result == {"type": "tool-result", "call_id": "call_weather_1",
                      "output": {"city": "Paris", "temperature_c": 18, "sky": "sunny"}}
    assert events[-1][0] == "done" and json.loads(events[-1][1])["tokens"] == len(names)


def test_the_ai_sdks_chunks_carry_every_part(server: Served) -> None:
    got = httpx.post(f"{url(server)}/chat", json=CHAT, timeout=TIMEOUT_S)
    chunks = [json.loads(data) for _, data in _sse(got.text) if data != "[DONE]"]
    types = [chunk["type"] for chunk in chunks]
    assert types[:3] == ["start", "start-step", "reasoning-start"]
    for kind in ("reasoning-end", "tool-input-start", "tool-input-delta", "tool-input-available",
                 "tool-output-available", "finish-step"):
        assert kind in types
    assert types.count("start-step") == 2 and types[-1] == "finish"
    assert "".join(c["delta"] for c in chunks if c["type"] == "text-delta") == TEXT
    assert next(c for c in chunks if c["type"] == "tool-input-available")["input"] == {"city": "Paris"}


def test_the_openai_sdk_reads_every_part_as_chat_chunks_and_responses_events(server: Served) -> None:
    client = openai.OpenAI(base_url=f"{url(server)}/v1", api_key="unused", max_retries=0, timeout=TIMEOUT_S)
    with client.chat.completions.stream(model="tokenwire-canned", messages=ASK, extra_body=FAST,
                                        stream_options={"include_usage": True}) as stream:
        final = stream.get_final_completion()
    message = final.choices[0].message
    assert message.content == TEXT and final.choices[0].finish_reason == "stop"
    assert [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or []] == [
        ("call_weather_1", "get_weather", '{"city": "Paris"}')]
    assert (message.model_extra or {})["reasoning_content"].endswith("the weather in Paris.")
    assert final.usage is not None and final.usage.prompt_tokens == 11
    with client.responses.stream(model="tokenwire-canned", input="slow readers?", extra_body=FAST) as responses:
        whole = responses.get_final_response()
    assert [item.type for item in whole.output] == ["reasoning", "message", "function_call", "message"]
    assert whole.output_text == TEXT and whole.usage is not None and whole.usage.total_tokens == 50


def test_a_bad_parts_value_is_each_routes_own_400_naming_it(server: Served) -> None:
    got = httpx.get(f"{url(server)}/stream?parts=images", timeout=TIMEOUT_S)
    assert (got.status_code, got.json()) == (400, {"error": BAD})
    chat = httpx.post(f"{url(server)}/chat", json={**CHAT, "parts": "images"}, timeout=TIMEOUT_S)
    assert (chat.status_code, chat.json()) == (400, {"error": BAD})
    completions = httpx.post(f"{url(server)}/v1/chat/completions", json={"model": "m", "messages": ASK,
                                                                         "parts": "images"}, timeout=TIMEOUT_S)
    assert completions.status_code == 400 and completions.json()["error"]["message"] == BAD
