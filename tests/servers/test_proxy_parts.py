"""The proxy carries the whole request and the whole answer: ``TokenStreams(Upstream(...))`` (what ``tokenwire
proxy`` serves) in front of a stand-in that streams as vLLM and SGLang do (``support.apps.upstream_standin``).

- the openai SDK reads through the proxy the content, reasoning, tool call (id, name, arguments), finish reason
  and usage it reads from the stand-in directly;
- the stand-in gets every field of the request the proxy does not own (tools, tool_choice, response_format,
  reasoning_effort, ...), the images and tool results of earlier messages, a response's function_call items;
- ``n: 2`` is a 400 naming n; an upstream that sends a second choice anyway fails the stream, never spliced.

Both run in this process (uvicorn in threads), so the proxy's log lines are caught.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletion
from support.apps import upstream_standin
from support.asgi_thread import in_thread

from tokenwire.asgi import TokenStreams
from tokenwire.upstream import Upstream, UpstreamConfig

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                          "required": ["city"]}}}]


def called(call_id: str, city: str) -> dict[str, Any]:
    """A call of get_weather, as a chat completion's tool_calls hold it."""
    arguments = json.dumps({"city": city})
    return {"id": call_id, "type": "function", "function": {"name": "get_weather", "arguments": arguments}}


ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
EARLIER = [{"role": "user", "content": [{"type": "text", "text": "And this picture?"}, IMAGE]},
           {"role": "assistant", "content": None, "tool_calls": [called("call_0", "Rome")]},
           {"role": "tool", "tool_call_id": "call_0", "content": [{"type": "text", "text": "21 C, sunny"}]}]


@pytest.fixture(scope="module")
def standin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The stand-in's OpenAI base URL and the file it records each request in."""
    calls = tmp_path_factory.mktemp("standin") / "calls.jsonl"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("STANDIN_CALLS", str(calls))
        with in_thread(upstream_standin.app) as base:
            yield base + "/v1", calls


@pytest.fixture(scope="module")
def proxy(standin: tuple[str, Path]) -> Iterator[str]:
    """The proxy's base URL (its OpenAI base is ``+ "/v1"``)."""
    with in_thread(TokenStreams(Upstream(UpstreamConfig(standin[0])))) as base:
        yield base


def client(base: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base, api_key="unused", max_retries=0, timeout=30)


def asked(calls: Path) -> int:
    """How many requests the stand-in has had."""
    return len(calls.read_text().splitlines()) if calls.exists() else 0


def last_body(calls: Path) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(calls.read_text().splitlines()[-1])["body"]
    return body


def accumulated(base: str, style: str) -> ChatCompletion:
    """The SDK's own accumulation of a streamed answer (what ``chat.completions.stream`` builds)."""
    state = ChatCompletionStreamState()
    for chunk in client(base).chat.completions.create(model=f"style={style}", messages=ASK, tools=TOOLS,
                                                      stream=True, stream_options={"include_usage": True}):
        state.handle_chunk(chunk)
    return state.get_final_completion()


def seen(completion: ChatCompletion, reasoning: str) -> dict[str, Any]:
    """What a reader of ``completion`` sees: content, reasoning, tool calls, finish reason, usage."""
    choice, usage = completion.choices[0], completion.usage
    assert usage is not None and usage.completion_tokens_details is not None
    return {"content": choice.message.content, "reasoning": (choice.message.model_extra or {}).get(reasoning),
            "tool_calls": [(call.id, call.function.name, call.function.arguments)
                           for call in choice.message.tool_calls or []],
            "finish_reason": choice.finish_reason,
            "usage": (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens,
                      usage.completion_tokens_details.reasoning_tokens)}


@pytest.mark.parametrize(("style", "reasoning"), [("vllm", "reasoning"), ("sglang", "reasoning_content")])
def test_the_sdk_reads_through_the_proxy_what_it_reads_directly(standin: tuple[str, Path], proxy: str, style: str,
                                                                reasoning: str) -> None:
    direct = seen(accumulated(standin[0], style), reasoning)
    assert direct == {"content": "Let me check the weather. ",
                      "reasoning": "The user asks for the weather; I should call get_weather.",
                      "tool_calls": [("chatcmpl-tool-7b3e", "get_weather", '{"city": "Paris"}')],
                      "finish_reason": "tool_calls", "usage": (20, 14, 34, 6)}
    assert seen(accumulated(proxy + "/v1", style), reasoning) == direct


def test_a_chat_completions_fields_and_earlier_content_reach_the_upstream(standin: tuple[str, Path],
                                                                          proxy: str) -> None:
    fields = {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
              "parallel_tool_calls": False, "reasoning_effort": "low", "temperature": 0.2, "seed": 7,
              "response_format": {"type": "json_schema", "json_schema": {"name": "w", "schema": {"type": "object"}}}}
    list(client(proxy + "/v1").chat.completions.create(
        model="n=2", messages=[*EARLIER, *ASK], stream=True, stream_options={"include_obfuscation": False},
        extra_body={"top_k": 20}, **fields))
    body = last_body(standin[1])
    assert {name: body.get(name) for name in fields} == fields
    assert body["top_k"] == 20 and body["stream"] is True and "n" not in body
    assert body["stream_options"] == {"include_obfuscation": False, "include_usage": True}
    assert body["messages"] == [*EARLIER, *ASK]


def test_a_responses_items_and_fields_reach_the_upstream_as_a_chat_completions(standin: tuple[str, Path],
                                                                               proxy: str) -> None:
    given = [{"role": "user", "content": [{"type": "input_text", "text": "Weather here?"},
                                          {"type": "input_image", "image_url": "https://example.org/a.png"}]},
             {"type": "reasoning", "id": "rs_1", "summary": []},
             {"type": "function_call", "call_id": "call_9", "name": "get_weather", "arguments": '{"city": "Oslo"}'},
             {"type": "function_call_output", "call_id": "call_9", "output": "-3 C"}]
    client(proxy + "/v1").responses.create(
        model="n=2", input=given, instructions="be brief", max_output_tokens=50,
        tools=[{"type": "function", "name": "get_weather", "parameters": {"type": "object"}, "strict": False}],
        tool_choice={"type": "function", "name": "get_weather"}, reasoning={"effort": "high"},
        text={"format": {"type": "json_schema", "name": "w", "schema": {"type": "object"}}}, temperature=0.5)
    body = last_body(standin[1])
    assert body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "Weather here?"},
                                     {"type": "image_url", "image_url": {"url": "https://example.org/a.png"}}]},
        {"role": "assistant", "content": None, "tool_calls": [called("call_9", "Oslo")]},
        {"role": "tool", "tool_call_id": "call_9", "content": "-3 C"}]
    assert {name: body.get(name) for name in ("max_tokens", "tools", "tool_choice", "reasoning_effort",
                                               "response_format", "temperature")} == {
        "max_tokens": 50, "reasoning_effort": "high", "temperature": 0.5,
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"},
                                                    "strict": False}}],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "response_format": {"type": "json_schema", "json_schema": {"name": "w", "schema": {"type": "object"}}}}
    assert not {"input", "instructions", "store", "reasoning", "text"} & set(body)


def test_a_chats_body_fields_are_a_chat_completions_and_its_tool_call_a_tool_part(standin: tuple[str, Path],
                                                                                  proxy: str) -> None:
    chat = httpx.post(proxy + "/chat", timeout=30, json={
        "id": "chat1", "trigger": "submit-message", "messageId": "m0", "model": "style=vllm", "tools": TOOLS,
        "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "weather?"}]}]})
    body = last_body(standin[1])
    assert (body["model"], body["tools"]) == ("style=vllm", TOOLS)
    assert not {"id", "trigger", "messageId"} & set(body)
    chunks = [json.loads(line[6:]) for line in chat.text.splitlines() if line.startswith("data: {")]
    available = [chunk for chunk in chunks if chunk["type"] == "tool-input-available"]
    assert available == [{"type": "tool-input-available", "toolCallId": "chatcmpl-tool-7b3e",
                          "toolName": "get_weather", "input": {"city": "Paris"}}]
    assert chunks[-1]["type"] == "finish" and chunks[-1]["finishReason"] == "tool-calls"


def test_n_other_than_one_is_refused_by_name(standin: tuple[str, Path], proxy: str) -> None:
    before = asked(standin[1])
    with pytest.raises(openai.BadRequestError) as refused:
        client(proxy + "/v1").chat.completions.create(model="n=2", messages=ASK, n=2, stream=True)
    assert refused.value.status_code == 400
    assert refused.value.body == {"message": "n must be 1: the proxy relays one answer per stream (several choices "
                                             "are neither spliced nor kept apart), got '2'",
                                  "type": "invalid_request_error", "code": None}
    assert asked(standin[1]) == before                              # the upstream was never asked
    assert client(proxy + "/v1").chat.completions.create(model="n=2", messages=ASK, n=1).choices[0].message.content \
        == " u0 u1"


def test_a_second_choice_from_the_upstream_fails_the_stream_by_name(proxy: str,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    text: list[str] = []
    with caplog.at_level(logging.ERROR), pytest.raises(openai.APIError) as raised:
        for chunk in client(proxy + "/v1").chat.completions.create(model="style=choices", messages=ASK, stream=True):
            text.extend(choice.delta.content or "" for choice in chunk.choices)
    assert (raised.value.message, "".join(text)) == ("the model raised UpstreamMalformed", "")
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert ("UpstreamMalformed: the upstream sent a malformed part: a chunk with choice index 1: several choices "
            "(n > 1) are not one answer, and only choice 0 is read") in logged
