"""The parts of an answer (``tokenwire.core.parts``): their log codec, their checks, and what follows what."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokenwire.core.frames import TokenItem, entry_frame
from tokenwire.core.parts import (
    PART_MARK,
    Data,
    File,
    Finish,
    PartChecker,
    PartError,
    Reasoning,
    Refusal,
    Source,
    Step,
    Text,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolResult,
    Usage,
    continuable,
    decode,
    encode,
    kind_of,
    text_of,
)
from tokenwire.core.sse import Decoder

EVERY_KIND = [Reasoning("thinking"), Refusal("no"), ToolCallStart("call_1", "get_weather"),
              ToolCallDelta("call_1", '{"city": "Par'), ToolCallEnd("call_1", {"city": "Paris"}),
              ToolResult("call_1", {"temperature": 21}), ToolResult("call_2", error="timed out"),
              Source("s1", url="https://example.org", title="Example"),
              Source("d1", title="Report", media_type="application/pdf", filename="r.pdf"),
              File("data:text/plain;base64,aGk=", "text/plain"), Data("weather", {"city": "Paris"}, data_id="w1"),
              Step(), Usage(12, 22, reasoning_tokens=5), Finish("tool_calls")]


def test_text_is_stored_as_it_is() -> None:
    assert encode("Hello") == "Hello" and encode(Text(" world")) == " world"
    assert decode(" world") == " world" and kind_of("Hello") == "text"


@pytest.mark.parametrize("part", EVERY_KIND, ids=lambda p: type(p).__name__)
def test_every_part_round_trips_through_one_log_entry(part: object) -> None:
    entry = encode(part)  # type: ignore[arg-type]
    assert entry.startswith(PART_MARK) and decode(entry) == part
    assert kind_of(entry) == part.kind  # type: ignore[attr-defined]


@given(st.text())
def test_no_text_passes_for_a_part(text: str) -> None:
    entry = encode(text)
    assert decode(entry) == text and text_of([entry]) == text and kind_of(entry) == "text"


def test_the_text_of_an_answer_skips_its_other_parts() -> None:
    entries = [encode(p) for p in (Reasoning("hmm"), "Let me ", "check.", ToolCallStart("c", "f"), Step(), "\0odd")]
    assert text_of(entries) == "Let me check.\0odd"


@pytest.mark.parametrize(("entry", "message"), [
    (PART_MARK + "{", "a log entry that is no part: '\\x00{'"),
    (PART_MARK + '{"type":"bogus"}', "a log entry that is no part"),
    (PART_MARK + '{"type":"reasoning","txt":"x"}', "a reasoning part with the wrong fields ['txt']"),
])
def test_an_entry_that_is_no_part_is_named(entry: str, message: str) -> None:
    with pytest.raises(PartError) as caught:
        decode(entry)
    assert str(caught.value).startswith(message)


@pytest.mark.parametrize(("make", "message"), [
    (lambda: ToolCallDelta("c", 7), "a tool call's argument delta's arguments must be a string, got 7"),
    (lambda: ToolCallStart("", "f"), "a tool call's start's call_id must be a non-empty string, got ''"),
    (lambda: ToolCallEnd("c", {1, 2}), "a tool call's end's input must be a JSON value, got {1, 2}"),
    (lambda: Finish("done"), "a finish reason must be one of stop, length, tool_calls, content_filter, error, "
                             "other; got 'done'"),
    (lambda: Usage(-1), "usage's input_tokens must be an int >= 0, got -1"),
    (lambda: Source("s"), "a source needs a url, or a media_type and a title"),
])
def test_a_malformed_part_is_refused_by_name(make: object, message: str) -> None:
    with pytest.raises(PartError) as caught:
        make()  # type: ignore[operator]
    assert str(caught.value).startswith(message)


def test_anything_else_is_not_a_part() -> None:
    with pytest.raises(PartError, match="a part must be a str or one of tokenwire.core.parts' classes, got 3"):
        encode(3)  # type: ignore[arg-type]


@pytest.mark.parametrize(("parts", "message"), [
    ([ToolCallDelta("c1", "{")], "part 0 (ToolCallDelta(call_id='c1', arguments='{')): the tool call 'c1' was "
                                 "never started"),
    ([ToolCallStart("c1", "f"), ToolCallStart("c1", "f")], "part 1 (ToolCallStart(call_id='c1', name='f')): the "
                                                           "tool call 'c1' was started already"),
    ([ToolCallStart("c1", "f"), ToolCallEnd("c1", {}), ToolCallDelta("c1", "x")],
     "part 2 (ToolCallDelta(call_id='c1', arguments='x')): the tool call 'c1' has ended already"),
    ([ToolResult("c9", 1)], "part 0 (ToolResult(call_id='c9', output=1, error=None)): a result for the tool call "
                            "'c9', which was never made"),
    ([Finish("stop"), "more"], "part 1: text after the answer's finish"),
])
def test_the_checker_names_a_part_that_may_not_stand_where_it_does(parts: list[object], message: str) -> None:
    checker = PartChecker()
    with pytest.raises(PartError) as caught:
        for index, part in enumerate(parts):
            checker.check(index, part)  # type: ignore[arg-type]
    assert str(caught.value) == message


def test_the_checker_takes_a_whole_answer_with_tools() -> None:
    checker = PartChecker()
    for index, part in enumerate([Reasoning("r"), "a", ToolCallStart("c", "f"), ToolCallDelta("c", "{}"),
                                  ToolCallEnd("c", {}), ToolResult("c", 1), Step(), "b", Finish("stop"),
                                  Usage(1, 2)]):
        checker.check(index, part)  # type: ignore[arg-type]


@pytest.mark.parametrize(("parts", "ok"), [
    (["a", Reasoning("b")], True),
    (["a", ToolCallStart("c", "f"), ToolCallDelta("c", "{")], False),          # inside a call's arguments
    (["a", ToolCallStart("c", "f"), ToolCallEnd("c", {})], False),             # awaits its result
    (["a", ToolCallStart("c", "f"), ToolCallEnd("c", {}), ToolResult("c", 1)], True),
    (["a", ToolCallStart("c", "f"), ToolCallEnd("c", {}), Step(), "b"], True),
])
def test_only_a_prefix_with_no_open_or_unanswered_call_is_continued(parts: list[object], ok: bool) -> None:
    assert continuable([encode(p) for p in parts]) is ok  # type: ignore[arg-type]


def test_tokenwire_frames_name_each_part_and_keep_token_for_text() -> None:
    entries = ["Hi", encode(ToolCallStart("c1", "get_weather")), encode("\0x")]
    wire = b"".join(entry_frame(TokenItem(i, e)) for i, e in enumerate(entries))
    events = Decoder().feed(wire)
    assert [(e.event, e.id) for e in events] == [("token", "0"), ("tool-call-start", "1"), ("token", "2")]
    assert events[1].data == '{"type":"tool-call-start","call_id":"c1","name":"get_weather"}'
    assert events[2].data == "\0x" and all(e.event != "error" for e in events)
