"""What a model may yield, made log entries (tokenwire.models.ModelParts): str as it is, tokenwire's parts, the
openai SDK's chunks and Responses events, anthropic's raw message events and LangChain's chunks, each built with
the real package's types; a malformed part is a PartError naming it and its index."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from support.client_streams import WEATHER, anthropic_events, chat_chunks, langchain_chunks

from tokenwire.core.parts import (
    PART_MARK,
    Finish,
    Part,
    PartError,
    Step,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolResult,
    Usage,
    decode,
)
from tokenwire.models import ModelParts

ROOT = Path(__file__).resolve().parents[2]
def parts_of(items: list[Any]) -> list[str | Part]:
    """What the log holds after a model yielded ``items`` and ended, decoded."""
    reader = ModelParts()
    entries: list[str] = []
    for item in items:
        entries += reader.entries(item, len(entries))
    entries += reader.close(len(entries))
    return [decode(entry) for entry in entries]


def test_a_str_is_its_own_entry_and_a_text_that_starts_with_the_mark_is_escaped() -> None:
    reader = ModelParts()
    assert reader.entries("Hello", 0) == ["Hello"]
    escaped = reader.entries(PART_MARK + "x", 1)
    assert escaped[0] != PART_MARK + "x" and decode(escaped[0]) == PART_MARK + "x"


def test_tokenwire_parts_are_logged_as_they_are_checked_where_they_stand() -> None:
    items: list[Any] = [*WEATHER, ToolResult("call_1", {"temperature_c": 18}), Step(), "Sunny.", Usage(3, 4),
                        Finish("stop")]
    assert parts_of(items) == items


@pytest.mark.parametrize(("items", "message"), [
    (["a", ToolCallDelta("nope", "{}")],
     "part 1 (ToolCallDelta(call_id='nope', arguments='{}')): the tool call 'nope' was never started"),
    ([ToolCallStart("c", "f"), ToolCallStart("c", "f")],
     "part 1 (ToolCallStart(call_id='c', name='f')): the tool call 'c' was started already"),
    ([Finish("stop"), "more"], "part 1: text after the answer's finish"),
    (["a", b"bytes"], "part 1: the model yielded b'bytes' (bytes); a model yields a str, a part of "
                      "tokenwire.core.parts, or a stream object of the openai, anthropic or LangChain clients"),
    ([{"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "id": "c", "function": {"name": "f", "arguments": 5}}]}}]}],
     "part 0: the tool call 'c''s function.arguments must be a string, got 5"),   # the chunk's first part's index
])
def test_a_malformed_part_is_a_part_error_naming_it_and_its_index(items: list[Any], message: str) -> None:
    with pytest.raises(PartError) as raised:
        parts_of(items)
    assert str(raised.value) == message


def test_a_text_that_is_no_utf8_is_named_as_before() -> None:
    with pytest.raises(PartError, match=r"^the model yielded a str that is not valid UTF-8 \(a lone surrogate at "
                                        r"position 1\) as token 0$"):
        ModelParts().entries("a\ud800", 0)


def test_a_continuation_knows_the_calls_of_its_prefix() -> None:
    reader = ModelParts([ToolCallStart("c", "f"), ToolCallEnd("c", {})])
    with pytest.raises(PartError, match="the tool call 'c' was started already"):
        reader.entries(ToolCallStart("c", "f"), 2)
    assert [decode(entry) for entry in reader.entries(ToolResult("c", 1), 2)] == [ToolResult("c", 1)]


def test_the_openai_sdks_chat_completion_chunks() -> None:
    assert parts_of(chat_chunks()) == [*WEATHER, Finish("tool_calls"), Usage(20, 14)]


def test_an_agent_loop_of_two_completions_finishes_with_the_last_and_sums_their_usage() -> None:
    first = chat_chunks()
    second = [c.model_copy(deep=True) for c in chat_chunks()[:1]]
    from openai.types.chat import ChatCompletionChunk
    second += [ChatCompletionChunk.model_validate({
        "id": "c2", "object": "chat.completion.chunk", "created": 0, "model": "m",
        "choices": [{"index": 0, "delta": {"content": "It is sunny."}, "finish_reason": "stop"}],
        "usage": None}), ChatCompletionChunk.model_validate({
        "id": "c2", "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": [],
        "usage": {"prompt_tokens": 40, "completion_tokens": 4, "total_tokens": 44}})]
    result = ToolResult("call_1", {"temperature_c": 18, "sky": "sunny"})
    assert parts_of([*first, result, Step(), *second]) == [*WEATHER, result, Step(), "It is sunny.",
                                                           Finish("stop"), Usage(60, 18)]


def test_the_openai_sdks_responses_events() -> None:
    from openai.types.responses import (
        ResponseCompletedEvent,
        ResponseFunctionCallArgumentsDeltaEvent,
        ResponseFunctionCallArgumentsDoneEvent,
        ResponseOutputItemAddedEvent,
        ResponseReasoningSummaryTextDeltaEvent,
        ResponseTextDeltaEvent,
    )
    item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather", "arguments": "",
            "status": "in_progress"}
    response = {"id": "resp_1", "object": "response", "created_at": 0, "model": "m", "output": [],
                "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "status": "completed",
                "usage": {"input_tokens": 20, "output_tokens": 14, "total_tokens": 34,
                          "input_tokens_details": {"cached_tokens": 2, "cache_write_tokens": 0},
                          "output_tokens_details": {"reasoning_tokens": 5}}}
    common = {"sequence_number": 0, "output_index": 0}
    events = [
        ResponseReasoningSummaryTextDeltaEvent.model_validate(
            {**common, "type": "response.reasoning_summary_text.delta", "item_id": "rs", "summary_index": 0,
             "delta": "The user wants "}),
        ResponseReasoningSummaryTextDeltaEvent.model_validate(
            {**common, "type": "response.reasoning_summary_text.delta", "item_id": "rs", "summary_index": 0,
             "delta": "the weather."}),
        *(ResponseTextDeltaEvent.model_validate({**common, "type": "response.output_text.delta", "item_id": "msg",
                                                 "content_index": 0, "delta": text, "logprobs": []})
          for text in ("Let me check ", "the weather. ")),
        ResponseOutputItemAddedEvent.model_validate({**common, "type": "response.output_item.added", "item": item}),
        *(ResponseFunctionCallArgumentsDeltaEvent.model_validate(
            {**common, "type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": piece})
          for piece in ('{"city', '": "Paris"}')),
        ResponseFunctionCallArgumentsDoneEvent.model_validate(
            {**common, "type": "response.function_call_arguments.done", "item_id": "fc_1",
             "arguments": '{"city": "Paris"}'}),
        ResponseCompletedEvent.model_validate({"sequence_number": 9, "type": "response.completed",
                                               "response": response}),
    ]
    assert parts_of(events) == [*WEATHER, Finish("tool_calls"), Usage(20, 14, 5, 2)]


def test_anthropics_raw_message_stream_events() -> None:
    assert parts_of(anthropic_events()) == [*WEATHER, Finish("tool_calls"), Usage(20, 14)]


def test_anthropics_input_json_for_a_block_never_started_is_named() -> None:
    from anthropic.types import RawContentBlockDeltaEvent
    bad = RawContentBlockDeltaEvent.model_validate({"type": "content_block_delta", "index": 7, "delta": {
        "type": "input_json_delta", "partial_json": "{"}})
    with pytest.raises(PartError, match=r"^part 0: input_json_delta for the content block 7, which is no tool_use "
                                        r"started"):
        parts_of([bad])


def test_langchains_ai_message_chunks() -> None:
    assert parts_of(langchain_chunks()) == [*WEATHER, Finish("tool_calls"), Usage(20, 14)]


def test_langchains_tool_message_is_the_result_and_the_next_chunk_a_new_step() -> None:
    from langchain_core.messages import AIMessageChunk, ToolMessage
    items = [*langchain_chunks(), ToolMessage(content="18 C, sunny", tool_call_id="call_1"),
             AIMessageChunk(content="It is sunny.", response_metadata={"finish_reason": "stop"})]
    assert parts_of(items)[len(WEATHER):] == [ToolResult("call_1", "18 C, sunny"), Step(), "It is sunny.",
                                              Finish("stop"), Usage(20, 14)]


def test_importing_tokenwire_and_serving_a_str_model_imports_no_client_package() -> None:
    script = textwrap.dedent("""
        import sys
        import httpx
        import tokenwire.asgi
        from tokenwire.asgi import TokenStreams

        def model(request):
            return iter([" a", " b"])

        async def main():
            app = TokenStreams(model)
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
                text = (await client.get("/stream")).text
            assert "event: done" in text and ' b' in text, text

        import asyncio
        asyncio.run(main())
        print(sorted(name for name in ("openai", "anthropic", "langchain_core") if name in sys.modules))
    """)
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "[]"
