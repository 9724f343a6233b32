"""OpenAI's Responses events of every part kind: their order, their numbers, and a resume from every number.

The events are checked against the ``openai`` SDK's own types: each one is
validated as a ``ResponseStreamEvent``, and every ``response`` object as a
``Response`` (pydantic, strictly), so a field the SDK does not know or
misses fails here.
"""

from __future__ import annotations

import json
from typing import Any, get_args

import pytest
from openai.types.responses import Response, ResponseStreamEvent

from tokenwire.core.endings import STOPPED, EarlyEnd, failed
from tokenwire.core.frames import TokenItem
from tokenwire.core.parts import (
    Data,
    File,
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
from tokenwire.endpoints.openai_responses import ResponseEvents, resume, whole_response
from tokenwire.endpoints.openai_wire import Answered
from tokenwire.endpoints.params import RequestError

ANSWERED = Answered("resp_abc", "any", 1700000000)
# Each event type's class in the SDK's union (its ``type`` literal -> the class).
EVENTS = {get_args(cls.model_fields["type"].annotation)[0]: cls for cls in get_args(get_args(ResponseStreamEvent)[0])}

# An answer with every part kind: reasoning, text, a tool call in pieces, its result, a second step, the rest.
PARTS: list[Any] = [
    Reasoning("Think"), Reasoning("ing."), "Let me check ", "the weather. ",
    ToolCallStart("call_1", "get_weather"), ToolCallDelta("call_1", '{"city": '), ToolCallDelta("call_1", '"Paris"}'),
    ToolCallEnd("call_1", {"city": "Paris"}), ToolResult("call_1", {"sky": "clear"}), Step(),
    Source("s1", url="https://example.com"), File("data:text/plain;base64,aGk=", "text/plain"), Data("note", {"a": 1}),
    "It is ", "sunny.", Refusal("No more."), "Bye.", Usage(34, 12, 5, 2), Finish("stop")]
ENTRIES = [encode(part) for part in PARTS]


class _Stream:
    """What a rendering reads of a stream."""

    def __init__(self, total: int, ending: EarlyEnd | None = None) -> None:
        self.stream_id, self.total, self.ending = "abc", total, ending
        self.policy, self.capacity, self.retry_ms = None, 4, 750

    def closing_frame(self, delivered_from: int, dropped: int) -> bytes:
        raise AssertionError("a response never sends tokenwire's closing frame")


def written(rendering: ResponseEvents, entries: list[str], cursor: int = -1, ending: EarlyEnd | None = None,
            ended: bool = True) -> bytes:
    """What the writer sends on one connection: the opening, the entries after ``cursor``, the closing."""
    stream = _Stream(len(entries), ending)
    out = rendering.opening(stream, cursor)       # type: ignore[arg-type]
    out += b"".join(rendering.token(TokenItem(i, entries[i])) for i in range(cursor + 1, len(entries)))
    return out + (rendering.closing(stream, cursor + 1, 0) if ended else b"")    # type: ignore[arg-type]


def events(data: bytes) -> list[dict[str, Any]]:
    """Each event's JSON, checked: its SSE event name is its type, and the SDK's types validate it."""
    decoded = Decoder().feed(data)
    bodies = [json.loads(event.data) for event in decoded]
    for event, body in zip(decoded, bodies, strict=True):
        assert event.event == body["type"]
        EVENTS[body["type"]].model_validate(body)
    return bodies


def test_a_text_stream_keeps_its_numbers_and_its_bytes() -> None:
    got = events(written(ResponseEvents(ANSWERED, False), ["Hi", " there"]))
    assert [(e["sequence_number"], e["type"]) for e in got] == [
        (0, "response.created"), (1, "response.in_progress"), (2, "response.output_item.added"),
        (3, "response.content_part.added"), (4, "response.output_text.delta"), (5, "response.output_text.delta"),
        (6, "response.output_text.done"), (7, "response.content_part.done"), (8, "response.output_item.done"),
        (9, "response.completed")]
    delta = ResponseEvents(ANSWERED, False, 3)
    delta.opening(_Stream(0), -1)   # type: ignore[arg-type]
    assert delta.token(TokenItem(0, "Hi")) == (          # the item's and the part's events (2, 3) are skipped
        b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","item_id":"msg_abc",'
        b'"output_index":0,"content_index":0,"logprobs":[],"sequence_number":4,"delta":"Hi"}\n\n')
    assert got[-1]["response"]["output"] == [{"id": "msg_abc", "type": "message", "status": "completed",
                                              "role": "assistant", "content": [{"type": "output_text",
                                                                                "text": "Hi there",
                                                                                "annotations": [],
                                                                                "logprobs": []}]}]


def test_an_empty_answer_has_an_empty_message_as_before() -> None:
    got = events(written(ResponseEvents(ANSWERED, False), []))
    assert [e["type"] for e in got] == ["response.created", "response.in_progress", "response.output_item.added",
                                        "response.content_part.added", "response.output_text.done",
                                        "response.content_part.done", "response.output_item.done",
                                        "response.completed"]


EXPECTED_TYPES = [
    "response.created", "response.in_progress",
    "response.output_item.added", "response.content_part.added",                       # the reasoning item
    "response.reasoning_text.delta", "response.reasoning_text.delta",
    "response.reasoning_text.done", "response.content_part.done", "response.output_item.done",
    "response.output_item.added", "response.content_part.added",                       # the first message
    "response.output_text.delta", "response.output_text.delta",
    "response.output_text.done", "response.content_part.done", "response.output_item.done",
    "response.output_item.added",                                                      # the function call
    "response.function_call_arguments.delta", "response.function_call_arguments.delta",
    "response.function_call_arguments.done", "response.output_item.done",
    "response.output_item.added", "response.content_part.added",                       # the second message
    "response.output_text.delta", "response.output_text.delta",
    "response.output_text.done", "response.content_part.done",
    "response.content_part.added", "response.refusal.delta",                           # its refusal part
    "response.refusal.done", "response.content_part.done",
    "response.content_part.added", "response.output_text.delta",                       # and its last text part
    "response.output_text.done", "response.content_part.done", "response.output_item.done",
    "response.completed"]


def test_every_part_kind_in_order_with_its_output_index() -> None:
    got = events(written(ResponseEvents(ANSWERED, True), ENTRIES))
    assert [e["type"] for e in got] == EXPECTED_TYPES
    assert [e["sequence_number"] for e in got] == list(range(len(got)))
    assert [e["output_index"] for e in got if e["type"] == "response.output_item.added"] == [0, 1, 2, 3]
    call = [e for e in got if e["type"].startswith("response.function_call_arguments")]
    assert [e.get("delta", e.get("arguments")) for e in call] == ['{"city": ', '"Paris"}', '{"city": "Paris"}']
    assert {e["item_id"] for e in call} == {"fc_abc_2"} and {e["output_index"] for e in call} == {2}
    final = got[-1]["response"]
    Response.model_validate(final)
    assert final["status"] == "completed" and final["background"] is True
    assert [item["type"] for item in final["output"]] == ["reasoning", "message", "function_call", "message"]
    assert final["output"][0]["content"] == [{"type": "reasoning_text", "text": "Thinking."}]
    assert final["output"][2] == {"id": "fc_abc_2", "type": "function_call", "status": "completed",
                                  "call_id": "call_1", "name": "get_weather", "arguments": '{"city": "Paris"}'}
    assert [part.get("text", part.get("refusal")) for part in final["output"][3]["content"]] == [
        "It is sunny.", "No more.", "Bye."]
    assert final["usage"] == {"input_tokens": 34, "input_tokens_details": {"cached_tokens": 2, "cache_write_tokens": 0},
                              "output_tokens": 12, "output_tokens_details": {"reasoning_tokens": 5},
                              "total_tokens": 46}
    assert whole_response(ANSWERED, ENTRIES, "completed", True) == final


@pytest.mark.parametrize("upto", range(len(ENTRIES) + 1))
def test_a_resume_after_every_event_gets_exactly_the_rest(upto: int) -> None:
    """For the log's every prefix, ended or still generating, a reader resumed after any event number gets the
    events after it, the same bytes a reader from the start got; one past the last is a 400 naming the range."""
    entries = ENTRIES[:upto]
    for ended in (True, False):
        whole = written(ResponseEvents(ANSWERED, True), entries, ended=ended)
        blocks = [block + b"\n\n" for block in whole.split(b"\n\n")[:-1]]
        for after in range(-1, len(blocks)):
            resumed = resume(ANSWERED, True, after, entries, ended)
            assert written(resumed.rendering, entries, resumed.cursor, ended=ended) == b"".join(blocks[after + 1:])
        with pytest.raises(RequestError) as past:
            resume(ANSWERED, True, len(blocks), entries, ended)
        assert str(past.value) == (f"starting_after {len(blocks)} is past the end: this response has events "
                                   f"0..{len(blocks) - 1} so far")


def test_a_resume_in_the_middle_of_the_arguments_sends_the_rest_of_the_call() -> None:
    first_delta = EXPECTED_TYPES.index("response.function_call_arguments.delta")
    resumed = resume(ANSWERED, True, first_delta, ENTRIES, True)
    assert resumed.cursor == PARTS.index(ToolCallDelta("call_1", '{"city": '))
    got = events(written(resumed.rendering, ENTRIES, resumed.cursor))
    assert got[0] == {"type": "response.function_call_arguments.delta", "sequence_number": first_delta + 1,
                      "item_id": "fc_abc_2", "output_index": 2, "delta": '"Paris"}'}
    assert got[1]["arguments"] == '{"city": "Paris"}'


@pytest.mark.parametrize(("finish", "reason"), [("length", "max_output_tokens"),
                                                ("content_filter", "content_filter")])
def test_a_length_or_filter_finish_leaves_the_response_incomplete(finish: str, reason: str) -> None:
    got = events(written(ResponseEvents(ANSWERED, False), ["Hi", encode(Finish(finish))]))
    assert got[-1]["type"] == "response.incomplete"
    assert (got[-1]["response"]["status"], got[-1]["response"]["incomplete_details"]) == ("incomplete",
                                                                                          {"reason": reason})


def test_an_early_end_closes_an_open_call_incomplete_and_a_failure_fails() -> None:
    entries = ENTRIES[:PARTS.index(ToolCallEnd("call_1", {"city": "Paris"}))]
    got = events(written(ResponseEvents(ANSWERED, False), entries, ending=STOPPED))
    assert [e["type"] for e in got[-3:]] == ["response.function_call_arguments.done", "response.output_item.done",
                                             "response.incomplete"]
    assert got[-2]["item"]["status"] == "incomplete" and got[-1]["response"]["status"] == "cancelled"
    failure = events(written(ResponseEvents(ANSWERED, False), ["Hi"], ending=failed("the model raised E")))
    assert failure[-1]["type"] == "response.failed"
    assert failure[-1]["response"]["error"] == {"code": "server_error", "message": "the model raised E"}


def test_a_call_with_no_argument_deltas_gets_its_arguments_whole() -> None:
    entries = [encode(ToolCallStart("c", "now")), encode(ToolCallEnd("c", {})), encode(Finish("tool_calls"))]
    got = events(written(ResponseEvents(ANSWERED, False), entries))
    assert [e["type"] for e in got[2:]] == ["response.output_item.added", "response.function_call_arguments.delta",
                                            "response.function_call_arguments.done", "response.output_item.done",
                                            "response.completed"]
    assert got[3]["delta"] == "{}" and got[-1]["response"]["output"][0]["arguments"] == "{}"


def test_the_object_of_a_response_still_generating_holds_what_came_so_far() -> None:
    upto = PARTS.index(ToolCallDelta("call_1", '"Paris"}'))
    whole = whole_response(ANSWERED, ENTRIES[:upto], "in_progress", True)
    Response.model_validate(whole)
    assert whole["usage"] is None and [item["status"] for item in whole["output"]] == ["completed", "completed",
                                                                                       "in_progress"]
    assert whole["output"][2]["arguments"] == '{"city": '
    assert whole_response(ANSWERED, [], "in_progress", True)["output"] == []


def test_an_entry_a_drop_policy_skipped_counts_one_event() -> None:
    rendering = ResponseEvents(ANSWERED, False)
    rendering.opening(_Stream(0), -1)   # type: ignore[arg-type]
    rendering.token(TokenItem(0, "a"))
    got = events(rendering.token(TokenItem(3, "d")) + rendering.closing(_Stream(4), 0, 2))   # type: ignore[arg-type]
    assert [(e["sequence_number"], e["type"]) for e in got] == [
        (7, "response.output_text.delta"), (8, "response.output_text.done"), (9, "response.content_part.done"),
        (10, "response.output_item.done"), (11, "response.completed")]
