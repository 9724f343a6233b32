"""A model that yields its client's stream objects as they come serves every dialect: the openai SDK's chunks
from ``AsyncOpenAI(base_url=<a stand-in on loopback that streams as vLLM does>)``, anthropic's raw message events
and LangChain's ``AIMessageChunk`` (built with those packages' types).  Each is read as tokenwire's frames, the AI
SDK's UI message stream on ``/chat`` and, with the real openai SDK, chat chunks and Responses events.  A model
that runs its tool itself (an agent loop in the factory) has its call, result and next step in the log and in
the frames; one that yields a malformed part ends ``failed`` on every dialect, naming the part and its index.

Every app runs in this process (uvicorn in threads), on the memory log.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import openai
import pytest
from support.apps import upstream_standin
from support.apps.parts import prefix_app
from support.asgi_thread import in_thread
from support.client_streams import anthropic_events, langchain_chunks
from support.models import yielding

from tokenwire.asgi import StreamRequest, TokenStreams
from tokenwire.core.parts import Finish, Part, Step, ToolCallDelta, ToolCallEnd, ToolCallStart, ToolResult

# Far more than any answer here takes on loopback.
TIMEOUT_S = 20
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
CHAT = {"messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "The weather in Paris?"}]}]}
# What each model's answer is, as its readers see it: reasoning, text, the call (id, arguments), usage.
EXPECTED = {
    "openai": ("".join(upstream_standin.REASONING), upstream_standin.TEXT, upstream_standin.CALL_ID,
               "".join(upstream_standin.ARGUMENTS), 34),
    "anthropic": ("The user wants the weather.", "Let me check the weather. ", "call_1", '{"city": "Paris"}', 34),
    "langchain": ("The user wants the weather.", "Let me check the weather. ", "call_1", '{"city": "Paris"}', 34),
}
RESULT = ToolResult("call_1", {"temperature_c": 18, "sky": "sunny"})
AGENT: list[str | Part] = ["Let me check. ", ToolCallStart("call_1", "get_weather"),
                           ToolCallDelta("call_1", '{"city": '), ToolCallDelta("call_1", '"Paris"}'),
                           ToolCallEnd("call_1", {"city": "Paris"}), RESULT, Step(), "It is 18 °C and sunny.",
                           Finish("stop")]
MALFORMED: list[str | Part] = ["Hello", " there", ToolCallDelta("call_9", '{"a": 1}')]
MALFORMED_ERROR = ("part 2 (ToolCallDelta(call_id='call_9', arguments='{\"a\": 1}')): the tool call 'call_9' was "
                   "never started")


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    """One server with a mount per model: ``/openai``, ``/responses``, ``/anthropic``, ``/langchain``, ``/agent``,
    ``/malformed``; ``/responses`` streams Responses events from another tokenwire's canned answer with parts."""
    with in_thread(upstream_standin.app) as standin, in_thread(TokenStreams()) as canned:
        async def responses_model(request: StreamRequest) -> AsyncIterator[Any]:
            client = openai.AsyncOpenAI(base_url=canned + "/v1", api_key="unused", max_retries=0)
            stream = await client.responses.create(model="tokenwire-canned", input="slow readers?", stream=True,
                                                   extra_body={"parts": "tools", "tokens": 5, "producer_ms": 1})
            return stream.__aiter__()

        async def openai_model(request: StreamRequest) -> AsyncIterator[Any]:
            client = openai.AsyncOpenAI(base_url=standin + "/v1", api_key="unused", max_retries=0)
            stream = await client.chat.completions.create(model="style=vllm", messages=ASK,  # type: ignore[arg-type]
                                                          stream=True, stream_options={"include_usage": True})
            return stream.__aiter__()

        mounts = {"/openai": TokenStreams(openai_model), "/responses": TokenStreams(responses_model),
                  "/anthropic": TokenStreams(yielding(anthropic_events())),
                  "/langchain": TokenStreams(yielding(langchain_chunks())), "/agent": TokenStreams(yielding(AGENT)),
                  "/malformed": TokenStreams(yielding(MALFORMED))}
        with in_thread(prefix_app(mounts)) as url:
            yield url


def _sse(response: httpx.Response) -> list[tuple[str, str]]:
    """(event, data) of every event of an SSE body (event ``message`` when unnamed)."""
    events = []
    for block in response.text.split("\n\n"):
        lines = [line for line in block.split("\n") if line and not line.startswith(":")]
        if not lines:
            continue
        name = next((line[7:] for line in lines if line.startswith("event: ")), "message")
        events.append((name, "\n".join(line[6:] for line in lines if line.startswith("data: "))))
    return events


def frames(url: str) -> list[tuple[str, str]]:
    return _sse(httpx.get(url + "/stream", timeout=TIMEOUT_S))


def ui_chunks(url: str) -> list[dict[str, Any]]:
    got = httpx.post(url + "/chat", json=CHAT, timeout=TIMEOUT_S)
    assert got.status_code == 200, got.text
    return [json.loads(data) for _, data in _sse(got) if data != "[DONE]"]


def sdk(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=TIMEOUT_S)


@pytest.mark.parametrize("mount", list(EXPECTED))
def test_a_clients_objects_are_tokenwires_frames(base: str, mount: str) -> None:
    reasoning, text, call_id, arguments, _ = EXPECTED[mount]
    events = frames(f"{base}/{mount}")
    data = {name: [json.loads(d) for n, d in events if n == name] for name in
            ("reasoning", "tool-call-start", "tool-call-delta", "tool-call-end", "usage", "finish")}
    assert "".join(d for n, d in events if n == "token") == text
    assert "".join(part["text"] for part in data["reasoning"]) == reasoning
    assert data["tool-call-start"] == [{"type": "tool-call-start", "call_id": call_id, "name": "get_weather"}]
    assert "".join(part["arguments"] for part in data["tool-call-delta"]) == arguments
    assert data["tool-call-end"] == [{"type": "tool-call-end", "call_id": call_id, "input": {"city": "Paris"}}]
    assert data["finish"] == [{"type": "finish", "reason": "tool_calls"}]
    assert data["usage"][0]["input_tokens"] + data["usage"][0]["output_tokens"] == EXPECTED[mount][4]
    assert events[-1][0] == "done"


@pytest.mark.parametrize("mount", list(EXPECTED))
def test_a_clients_objects_are_the_ai_sdks_chunks(base: str, mount: str) -> None:
    reasoning, text, call_id, arguments, _ = EXPECTED[mount]
    chunks = ui_chunks(f"{base}/{mount}")
    of = {kind: [c for c in chunks if c["type"] == kind] for kind in {c["type"] for c in chunks}}
    assert "".join(c["delta"] for c in of["reasoning-delta"]) == reasoning
    assert "".join(c["delta"] for c in of["text-delta"]) == text
    assert [(c["toolCallId"], c["toolName"]) for c in of["tool-input-start"]] == [(call_id, "get_weather")]
    assert "".join(c["inputTextDelta"] for c in of["tool-input-delta"]) == arguments
    assert [c["input"] for c in of["tool-input-available"]] == [{"city": "Paris"}]
    assert chunks[-1]["type"] == "finish" and chunks[-1]["finishReason"] == "tool-calls"


@pytest.mark.parametrize("mount", list(EXPECTED))
def test_a_clients_objects_are_read_by_the_openai_sdk_as_chat_chunks(base: str, mount: str) -> None:
    reasoning, text, call_id, arguments, total = EXPECTED[mount]
    with sdk(f"{base}/{mount}").chat.completions.stream(model="any", messages=ASK,  # type: ignore[arg-type]
                                                        stream_options={"include_usage": True}) as stream:
        final = stream.get_final_completion()
    choice = final.choices[0]
    assert choice.message.content == text and choice.finish_reason == "tool_calls"
    assert [(c.id, c.function.name, c.function.arguments) for c in choice.message.tool_calls or []] == [
        (call_id, "get_weather", arguments)]
    assert (choice.message.model_extra or {})["reasoning_content"] == reasoning
    assert final.usage is not None and final.usage.total_tokens == total


@pytest.mark.parametrize("mount", list(EXPECTED))
def test_a_clients_objects_are_read_by_the_openai_sdk_as_responses_events(base: str, mount: str) -> None:
    _, text, call_id, arguments, total = EXPECTED[mount]
    with sdk(f"{base}/{mount}").responses.stream(model="any", input="The weather in Paris?") as stream:
        final = stream.get_final_response()
    calls = [item for item in final.output if item.type == "function_call"]
    assert final.output_text == text
    assert [(c.call_id, c.name, c.arguments) for c in calls] == [(call_id, "get_weather", arguments)]
    assert final.usage is not None and final.usage.total_tokens == total


def test_the_openai_sdks_responses_events_are_every_dialects_parts(base: str) -> None:
    """A model yielding ``AsyncOpenAI().responses.create(stream=True)``'s events (from tokenwire's own canned answer
    with parts: reasoning, a message, a function_call, a second message, usage)."""
    events = frames(f"{base}/responses")
    names = [name for name, _ in events if name not in ("open", "done")]
    assert names[:4] == ["reasoning"] * 4 and names[-2:] == ["finish", "usage"]      # as the adapters end
    assert "".join(d for n, d in events if n == "token").startswith("Let me check the weather first. It is 18")
    start = next(json.loads(d) for n, d in events if n == "tool-call-start")
    assert start == {"type": "tool-call-start", "call_id": "call_weather_1", "name": "get_weather"}
    assert next(json.loads(d) for n, d in events if n == "tool-call-end")["input"] == {"city": "Paris"}
    assert json.loads(events[-3][1]) == {"type": "finish", "reason": "tool_calls"}     # the response made a call
    with sdk(f"{base}/responses").chat.completions.stream(model="any", messages=ASK,  # type: ignore[arg-type]
                                                          stream_options={"include_usage": True}) as stream:
        final = stream.get_final_completion()
    assert [c.function.arguments for c in final.choices[0].message.tool_calls or []] == ['{"city": "Paris"}']
    assert final.usage is not None and final.usage.total_tokens == 50


def test_a_model_that_runs_its_tool_itself_has_the_call_the_result_and_the_next_step_in_the_frames(
        base: str) -> None:
    events = frames(f"{base}/agent")
    numbered = [(name, data) for name, data in events if name not in ("open", "done")]
    assert [name for name, _ in numbered] == ["token", "tool-call-start", "tool-call-delta", "tool-call-delta",
                                              "tool-call-end", "tool-result", "step", "token", "finish"]
    assert json.loads(numbered[5][1]) == {"type": "tool-result", "call_id": "call_1",
                                          "output": {"temperature_c": 18, "sky": "sunny"}}
    assert numbered[7][1] == "It is 18 °C and sunny."
    chunks = [c["type"] for c in ui_chunks(f"{base}/agent")]
    assert chunks.count("start-step") == 2 and "tool-output-available" in chunks
    assert chunks.index("tool-output-available") < chunks.index("finish-step") < len(chunks) - 2


def test_a_malformed_part_fails_every_dialect_naming_it_and_its_index(base: str) -> None:
    url = f"{base}/malformed"
    events = frames(url)
    assert [d for n, d in events if n == "token"] == ["Hello", " there"]          # every part before it stays
    assert events[-1][0] == "failed" and json.loads(events[-1][1])["error"] == MALFORMED_ERROR
    chunks = ui_chunks(url)
    assert "".join(c["delta"] for c in chunks if c["type"] == "text-delta") == "Hello there"
    assert [c["errorText"] for c in chunks if c["type"] == "error"] == [MALFORMED_ERROR]
    got = httpx.post(url + "/v1/chat/completions", json={"model": "any", "messages": ASK, "stream": True},
                     timeout=TIMEOUT_S)
    bodies = [json.loads(d) for _, d in _sse(got) if d != "[DONE]"]
    assert "".join(b["choices"][0]["delta"].get("content") or "" for b in bodies if b.get("choices")) == "Hello there"
    assert [b["error"]["message"] for b in bodies if "error" in b] == [MALFORMED_ERROR]
    responses = httpx.post(url + "/v1/responses", json={"model": "any", "input": "hi", "stream": True},
                           timeout=TIMEOUT_S)
    failed = [json.loads(d) for n, d in _sse(responses) if n == "response.failed"]
    assert [f["response"]["error"]["message"] for f in failed] == [MALFORMED_ERROR]
