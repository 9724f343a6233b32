"""OpenAI's chat completion chunks of every part kind, read back by the ``openai`` SDK's own accumulator.

Each chunk is validated as the SDK's ``ChatCompletionChunk`` and fed to its
``ChatCompletionStreamState`` (what ``client.chat.completions.stream``
uses), which accumulates tool calls by their ``index``; the whole answer
(no ``stream``) is validated as a ``ChatCompletion``.
"""

from __future__ import annotations

import json
from typing import Any

from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from tokenwire.core.endings import STOPPED, EarlyEnd, failed
from tokenwire.core.frames import TokenItem
from tokenwire.core.parts import (
    Data,
    Finish,
    Reasoning,
    Refusal,
    Source,
    Step,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolResult,
    Usage,
    encode,
)
from tokenwire.core.sse import Decoder
from tokenwire.endpoints.openai_chat import ChatChunks, chat_completion
from tokenwire.endpoints.openai_wire import Answered

ANSWERED = Answered("chatcmpl-abc", "any", 1700000000)
WEATHER = [ToolCallStart("call_1", "get_weather"), ToolCallDelta("call_1", '{"city": '),
           ToolCallDelta("call_1", '"Paris"}'), ToolCallEnd("call_1", {"city": "Paris"})]
# Reasoning, text, two tool calls (the second's arguments whole at its end), a result, a source: vLLM's shape.
PARTS: list[Any] = [Reasoning("Think"), Reasoning("ing."), "Let me check ", "the weather. ", *WEATHER,
                    ToolCallStart("call_2", "get_time"), ToolCallEnd("call_2", {"tz": "CET"}),
                    ToolResult("call_1", {"sky": "clear"}), Source("s1", url="https://example.com"),
                    Data("note", 1), Usage(34, 12, 5, 2)]


class _Stream:
    """What a rendering reads of a stream."""

    def __init__(self, total: int, ending: EarlyEnd | None = None) -> None:
        self.stream_id, self.total, self.ending = "abc", total, ending
        self.policy, self.capacity, self.retry_ms = None, 4, 750

    def closing_frame(self, delivered_from: int, dropped: int) -> bytes:
        raise AssertionError("a chat completion never sends tokenwire's closing frame")


def written(parts: list[Any], ending: EarlyEnd | None = None, include_usage: bool = True) -> list[Any]:
    """The data of each event one connection gets (JSON, or the ``[DONE]`` string)."""
    rendering, stream = ChatChunks(ANSWERED, include_usage), _Stream(len(parts), ending)
    entries = [encode(part) for part in parts]
    data = rendering.opening(stream, -1)     # type: ignore[arg-type]
    data += b"".join(rendering.token(TokenItem(i, entry)) for i, entry in enumerate(entries))
    data += rendering.closing(stream, 0, 0)  # type: ignore[arg-type]
    return [event.data if event.data == "[DONE]" else json.loads(event.data) for event in Decoder().feed(data)]


def accumulated(chunks: list[Any]) -> Any:
    """The SDK's final completion of ``chunks`` (each validated as a ``ChatCompletionChunk`` first)."""
    state: ChatCompletionStreamState[None] = ChatCompletionStreamState()
    assert chunks[-1] == "[DONE]"
    for chunk in chunks[:-1]:
        state.handle_chunk(ChatCompletionChunk.model_validate(chunk))
    return state.get_final_completion()


def test_a_text_chunk_is_the_bytes_it_always_was() -> None:
    rendering = ChatChunks(ANSWERED)
    assert rendering.token(TokenItem(0, "Hi")) == (
        b'data: {"id":"chatcmpl-abc","object":"chat.completion.chunk","created":1700000000,"model":"any",'
        b'"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}\n\n')
    chunks = written(["Hi"])
    assert [chunk["choices"][0]["finish_reason"] for chunk in chunks[:-2]] == [None, None, "stop"]
    assert chunks[-2]["usage"] == {"prompt_tokens": 0, "completion_tokens": 1, "total_tokens": 1}


def test_every_part_kind_reaches_the_sdks_accumulator() -> None:
    chunks = written(PARTS)
    deltas = [chunk["choices"][0]["delta"] for chunk in chunks[1:-3]]     # role chunk ... finish, usage, [DONE]
    assert deltas[:2] == [{"reasoning_content": "Think", "reasoning": "Think"},
                          {"reasoning_content": "ing.", "reasoning": "ing."}]
    assert deltas[4:8] == [
        {"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                         "function": {"name": "get_weather", "arguments": ""}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]},
        {"tool_calls": [{"index": 1, "id": "call_2", "type": "function",
                         "function": {"name": "get_time", "arguments": ""}}]}]
    assert deltas[8:] == [{"tool_calls": [{"index": 1, "function": {"arguments": '{"tz": "CET"}'}}]}]
    final = accumulated(chunks)
    message = final.choices[0].message
    assert message.content == "Let me check the weather. "
    assert [(call.id, call.function.name, call.function.arguments) for call in message.tool_calls] == [
        ("call_1", "get_weather", '{"city": "Paris"}'), ("call_2", "get_time", '{"tz": "CET"}')]
    assert message.reasoning_content == "Thinking." and message.reasoning == "Thinking."   # type: ignore[attr-defined]
    assert final.choices[0].finish_reason == "tool_calls"
    assert chunks[-2]["usage"] == {"prompt_tokens": 34, "completion_tokens": 12, "total_tokens": 46,
                                   "prompt_tokens_details": {"cached_tokens": 2},
                                   "completion_tokens_details": {"reasoning_tokens": 5}}


def test_the_finish_reason_is_the_real_one() -> None:
    def reason(parts: list[Any], ending: EarlyEnd | None = None) -> str:
        return str(written(parts, ending, include_usage=False)[-2]["choices"][0]["finish_reason"])

    assert reason([*WEATHER, ToolResult("call_1", 1), Step(), "It is sunny."]) == "stop"    # the last step's
    assert reason(["Hi", *WEATHER]) == "tool_calls"
    assert reason([*WEATHER, Finish("stop")]) == "stop"
    assert reason(["Hi", Finish("length"), Usage(1, 2)]) == "length"
    assert reason(["Hi", Finish("content_filter")]) == "content_filter"
    assert reason([*WEATHER[:2]], STOPPED) == "abort"
    assert written(["Hi"], failed("the model raised E"))[-2:] == [
        {"error": {"message": "the model raised E", "type": "server_error", "code": None}}, "[DONE]"]


def test_a_refusal_is_delta_refusal() -> None:
    chunks = written(["I ", Refusal("can't.")], include_usage=False)
    assert chunks[2]["choices"][0]["delta"] == {"refusal": "can't."}
    assert accumulated(chunks).choices[0].message.refusal == "can't."


def test_the_whole_answer_carries_every_part() -> None:
    whole = chat_completion(ANSWERED, [encode(part) for part in [*PARTS, Refusal("No."), Finish("tool_calls")]],
                            None)
    ChatCompletion.model_validate(whole)
    message = whole["choices"][0]["message"]
    assert message == {"role": "assistant", "content": "Let me check the weather. ", "refusal": "No.",
                       "tool_calls": [{"id": "call_1", "type": "function",
                                       "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
                                      {"id": "call_2", "type": "function",
                                       "function": {"name": "get_time", "arguments": '{"tz": "CET"}'}}],
                       "reasoning_content": "Thinking.", "reasoning": "Thinking."}
    assert whole["choices"][0]["finish_reason"] == "tool_calls"
    assert whole["usage"]["total_tokens"] == 46
    calls_only = chat_completion(ANSWERED, [encode(part) for part in WEATHER], None)
    assert calls_only["choices"][0]["message"]["content"] is None
    assert calls_only["choices"][0]["finish_reason"] == "tool_calls"
    text = chat_completion(ANSWERED, ["Hi", " there"], STOPPED)
    assert text["choices"][0] == {"index": 0, "message": {"role": "assistant", "content": "Hi there",
                                                          "refusal": None},
                                  "logprobs": None, "finish_reason": "abort"}
    assert text["usage"] == {"prompt_tokens": 0, "completion_tokens": 2, "total_tokens": 2}
