"""Chat completion chunks read as parts (``tokenwire.models.openai_chat``): as vLLM and SGLang stream them."""

from __future__ import annotations

from typing import Any

import pytest

from tokenwire.core.parts import (
    Finish,
    PartChecker,
    PartError,
    Reasoning,
    Refusal,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)
from tokenwire.models.openai_chat import ChunkParts


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, index: int = 0) -> dict[str, Any]:
    return {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": index, "delta": delta or {}, "finish_reason": finish}]}


def call(index: int, arguments: str, call_id: str | None = None, name: str | None = None) -> dict[str, Any]:
    piece: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if call_id is not None:
        piece.update(id=call_id, type="function")
        piece["function"]["name"] = name
    return {"tool_calls": [piece]}


USAGE = {"prompt_tokens": 20, "completion_tokens": 14, "total_tokens": 34,
         "completion_tokens_details": {"reasoning_tokens": 5}, "prompt_tokens_details": {"cached_tokens": 3}}
VLLM = [chunk({"role": "assistant", "content": ""}), chunk({"reasoning": "The user wants "}),
        chunk({"reasoning": "the weather."}), chunk({"content": "Let me check the weather. "}),
        chunk(call(0, "", "call_1", "get_weather")), chunk(call(0, '{"city": ')), chunk(call(0, '"Paris"}')),
        chunk({}, "tool_calls"), {**chunk(), "choices": [], "usage": USAGE}]
PARTS = [Reasoning("The user wants "), Reasoning("the weather."), "Let me check the weather. ",
         ToolCallStart("call_1", "get_weather"), ToolCallDelta("call_1", '{"city": '),
         ToolCallDelta("call_1", '"Paris"}'), ToolCallEnd("call_1", {"city": "Paris"}), Finish("tool_calls"),
         Usage(input_tokens=20, output_tokens=14, reasoning_tokens=5, cached_input_tokens=3)]


def read(chunks: list[Any]) -> list[Any]:
    reader = ChunkParts()
    parts = [part for one in chunks for part in reader.feed(one)]
    return parts + reader.close()


def test_a_vllm_stream_is_its_reasoning_text_tool_call_finish_and_usage() -> None:
    parts = read(VLLM)
    assert parts == PARTS
    checker = PartChecker()
    for index, part in enumerate(parts):
        checker.check(index, part)


def test_sglang_and_deepseek_reasoning_content_is_reasoning_and_both_names_are_read_once() -> None:
    assert read([chunk({"reasoning_content": "hmm"}), chunk({"reasoning": "a", "reasoning_content": "a"})]) \
        == [Reasoning("hmm"), Reasoning("a")]


def test_a_refusal_is_a_refusal() -> None:
    assert read([chunk({"refusal": "I can't."}), chunk({}, "stop")]) == [Refusal("I can't."), Finish("stop")]


def test_the_next_index_ends_a_call_and_a_whole_call_in_one_piece_is_read() -> None:
    parts = read([chunk(call(0, '{"a": 1}', "c0", "f")), chunk(call(1, "", "c1", "g")), chunk({}, "tool_calls")])
    assert parts == [ToolCallStart("c0", "f"), ToolCallDelta("c0", '{"a": 1}'), ToolCallEnd("c0", {"a": 1}),
                     ToolCallStart("c1", "g"), ToolCallEnd("c1", {}), Finish("tool_calls")]


def test_a_call_open_at_the_streams_end_ends_there_and_a_usage_on_a_choice_chunk_is_sent_last() -> None:
    last = chunk(call(0, "{}", "c0", "f")) | {"usage": {"prompt_tokens": 1, "completion_tokens": 2}}
    assert read([last]) == [ToolCallStart("c0", "f"), ToolCallDelta("c0", "{}"), ToolCallEnd("c0", {}),
                            Usage(input_tokens=1, output_tokens=2)]


def test_finish_reasons_tokenwire_does_not_name_are_other() -> None:
    assert read([chunk({}, "abort")]) == [Finish("other")]
    assert read([chunk({}, "function_call")]) == [Finish("tool_calls")]


def test_the_openai_sdks_chunk_objects_are_read_by_their_model_dump() -> None:
    from openai.types.chat import ChatCompletionChunk

    assert read([ChatCompletionChunk.model_validate(one) for one in VLLM]) == PARTS


@pytest.mark.parametrize(("chunks", "message"), [
    ([chunk(call(0, '{"city": "Par', "c0", "get_weather")), chunk({}, "tool_calls")],
     "the tool call 'c0' (get_weather) ended with arguments that are not JSON: \"{\\\"city\\\": \\\"Par\""),
    ([chunk({"content": "x"}, index=1)],
     "a chunk with choice index 1: several choices (n > 1) are not one answer, and only choice 0 is read"),
    ([chunk(call(0, "{}", "c0", "f")), chunk(call(1, "{}", "c1", "g")), chunk(call(0, "1"))],
     'a piece of the tool call at index 0, which ended when index 1 started: {"index": 0, "function": '
     '{"arguments": "1"}}'),
    ([chunk(call(0, "{}"))], 'the tool call at index 0 starts with no function.name: {"index": 0, "function": '
                             '{"arguments": "{}"}}'),
    ([chunk({"content": 7})], "delta.content must be a string, got 7"),
    ([{"object": "chat.completion.chunk"}],
     'a chat completion chunk needs a list of choices, got {"object": "chat.completion.chunk"}'),
    ([chunk({}, "stop"), chunk({}, "stop")], 'a second finish_reason "stop": the answer had finished'),
    ([{"choices": [], "usage": {"prompt_tokens": -1}}], "usage's prompt_tokens must be an int >= 0, got -1"),
])
def test_what_is_no_part_is_named(chunks: list[Any], message: str) -> None:
    with pytest.raises(PartError) as caught:
        read(chunks)
    assert str(caught.value) == message
