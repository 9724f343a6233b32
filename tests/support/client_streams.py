"""The stream objects of the clients a model may yield, built with the real packages' types (no network); this
module holds no tests.

Each builder gives one answer, as its client streams it: the reasoning "The user wants the weather.", the text
"Let me check the weather. " and a call of ``get_weather({"city": "Paris"})`` whose arguments come in two pieces,
finished ``tool_calls`` with 20 input and 14 output tokens: ``WEATHER`` is what tokenwire reads of each.
"""

from __future__ import annotations

from typing import Any

from tokenwire.core.parts import Part, Reasoning, ToolCallDelta, ToolCallEnd, ToolCallStart

# The parts every builder's objects become from its client's objects: reasoning, text, get_weather's call in pieces.
WEATHER: list[str | Part] = [Reasoning("The user wants "), Reasoning("the weather."), "Let me check ", "the weather. ",
                             ToolCallStart("call_1", "get_weather"), ToolCallDelta("call_1", '{"city'),
                             ToolCallDelta("call_1", '": "Paris"}'), ToolCallEnd("call_1", {"city": "Paris"})]


def chat_chunks() -> list[Any]:
    from openai.types.chat import ChatCompletionChunk

    def chunk(delta: dict[str, Any], finish: str | None = None, usage: dict[str, Any] | None = None) -> Any:
        choices = [] if usage else [{"index": 0, "delta": delta, "finish_reason": finish}]
        return ChatCompletionChunk.model_validate({"id": "c1", "object": "chat.completion.chunk", "created": 0,
                                                   "model": "m", "choices": choices, "usage": usage})

    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": ""}}
    return [chunk({"role": "assistant", "content": ""}), chunk({"reasoning_content": "The user wants "}),
            chunk({"reasoning_content": "the weather."}), chunk({"content": "Let me check "}),
            chunk({"content": "the weather. "}), chunk({"tool_calls": [call]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city'}}]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": '": "Paris"}'}}]}),
            chunk({}, "tool_calls"),
            chunk({}, usage={"prompt_tokens": 20, "completion_tokens": 14, "total_tokens": 34})]


def anthropic_events() -> list[Any]:
    from anthropic.types import (
        RawContentBlockDeltaEvent,
        RawContentBlockStartEvent,
        RawContentBlockStopEvent,
        RawMessageDeltaEvent,
        RawMessageStartEvent,
        RawMessageStopEvent,
    )
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude", "content": [],
               "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 20, "output_tokens": 1}}

    def delta(index: int, body: dict[str, Any]) -> Any:
        return RawContentBlockDeltaEvent.model_validate({"type": "content_block_delta", "index": index, "delta": body})

    return [
        RawMessageStartEvent.model_validate({"type": "message_start", "message": message}),
        RawContentBlockStartEvent.model_validate({"type": "content_block_start", "index": 0, "content_block": {
            "type": "thinking", "thinking": "", "signature": ""}}),
        delta(0, {"type": "thinking_delta", "thinking": "The user wants "}),
        delta(0, {"type": "thinking_delta", "thinking": "the weather."}),
        delta(0, {"type": "signature_delta", "signature": "sig"}),
        RawContentBlockStopEvent.model_validate({"type": "content_block_stop", "index": 0}),
        RawContentBlockStartEvent.model_validate({"type": "content_block_start", "index": 1, "content_block": {
            "type": "text", "text": ""}}),
        delta(1, {"type": "text_delta", "text": "Let me check "}), delta(1, {"type": "text_delta",
                                                                            "text": "the weather. "}),
        RawContentBlockStopEvent.model_validate({"type": "content_block_stop", "index": 1}),
        RawContentBlockStartEvent.model_validate({"type": "content_block_start", "index": 2, "content_block": {
            "type": "tool_use", "id": "call_1", "name": "get_weather", "input": {}}}),
        delta(2, {"type": "input_json_delta", "partial_json": '{"city'}),
        delta(2, {"type": "input_json_delta", "partial_json": '": "Paris"}'}),
        RawContentBlockStopEvent.model_validate({"type": "content_block_stop", "index": 2}),
        RawMessageDeltaEvent.model_validate({"type": "message_delta", "delta": {"stop_reason": "tool_use",
                                                                                "stop_sequence": None},
                                             "usage": {"output_tokens": 14}}),
        RawMessageStopEvent.model_validate({"type": "message_stop"}),
    ]


def langchain_chunks() -> list[Any]:
    from langchain_core.messages import AIMessageChunk
    return [
        AIMessageChunk(content="", additional_kwargs={"reasoning_content": "The user wants "}),
        AIMessageChunk(content="", additional_kwargs={"reasoning_content": "the weather."}),
        AIMessageChunk(content="Let me check "), AIMessageChunk(content="the weather. "),
        AIMessageChunk(content="", tool_call_chunks=[{"name": "get_weather", "args": '{"city', "id": "call_1",
                                                      "index": 0}]),
        AIMessageChunk(content="", tool_call_chunks=[{"name": None, "args": '": "Paris"}', "id": None, "index": 0}]),
        AIMessageChunk(content="", response_metadata={"finish_reason": "tool_calls"},
                       usage_metadata={"input_tokens": 20, "output_tokens": 14, "total_tokens": 34}),
    ]
