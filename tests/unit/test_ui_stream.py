"""The AI SDK's UI message stream as a state machine (``tokenwire.endpoints.ui_stream``): every part's chunks,
their numbers, and a resume from every chunk number (the SDK's own clients reading them: ``tests/node``)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tokenwire.core import parts
from tokenwire.core.endings import EarlyEnd
from tokenwire.core.frames import TokenItem
from tokenwire.core.sse import Decoder
from tokenwire.endpoints.ui_stream import DONE, ChatFrames, chunk_count

# An answer as a model with a tool gives it: reasoning, text, a tool call in pieces, its result, a second step.
ANSWER: list[str | parts.Part] = [
    parts.Reasoning("The user wants "), parts.Reasoning("the weather."), "Let me ", "check. ",
    parts.ToolCallStart("call_1", "get_weather"), parts.ToolCallDelta("call_1", '{"city": '),
    parts.ToolCallDelta("call_1", '"Paris"}'), parts.ToolCallEnd("call_1", {"city": "Paris"}),
    parts.ToolResult("call_1", {"celsius": 21}), parts.Step(), "It is ", "21 degrees.",
    parts.Source("s1", url="https://example.org/paris", title="Paris"), parts.Usage(34, 12, 5),
    parts.Finish("stop")]
ENTRIES = [parts.encode(part) for part in ANSWER]
# Every chunk of ANSWER, in order: the chunk numbered n is WHOLE[n].
WHOLE: list[dict[str, Any]] = [
    {"type": "start", "messageId": "msg-S"}, {"type": "start-step"},
    {"type": "reasoning-start", "id": "reasoning-0"},
    {"type": "reasoning-delta", "id": "reasoning-0", "delta": "The user wants "},
    {"type": "reasoning-delta", "id": "reasoning-0", "delta": "the weather."},
    {"type": "reasoning-end", "id": "reasoning-0"}, {"type": "text-start", "id": "text-0"},
    {"type": "text-delta", "id": "text-0", "delta": "Let me "},
    {"type": "text-delta", "id": "text-0", "delta": "check. "},
    {"type": "text-end", "id": "text-0"},
    {"type": "tool-input-start", "toolCallId": "call_1", "toolName": "get_weather"},
    {"type": "tool-input-delta", "toolCallId": "call_1", "inputTextDelta": '{"city": '},
    {"type": "tool-input-delta", "toolCallId": "call_1", "inputTextDelta": '"Paris"}'},
    {"type": "tool-input-available", "toolCallId": "call_1", "toolName": "get_weather", "input": {"city": "Paris"}},
    {"type": "tool-output-available", "toolCallId": "call_1", "output": {"celsius": 21}},
    {"type": "finish-step"}, {"type": "start-step"},
    {"type": "text-start", "id": "text-1"}, {"type": "text-delta", "id": "text-1", "delta": "It is "},
    {"type": "text-delta", "id": "text-1", "delta": "21 degrees."},
    {"type": "source-url", "sourceId": "s1", "url": "https://example.org/paris", "title": "Paris"},
    {"type": "text-end", "id": "text-1"}, {"type": "finish-step"},
    {"type": "finish", "finishReason": "stop",
     "messageMetadata": {"usage": {"inputTokens": 34, "outputTokens": 12, "totalTokens": 46, "reasoningTokens": 5,
                                   "cachedInputTokens": 0}}}]


class _Stream:
    """What a rendering reads of a stream."""

    def __init__(self, total: int, ending: EarlyEnd | None = None) -> None:
        self.stream_id, self.total, self.ending = "S", total, ending
        self.policy, self.capacity, self.retry_ms = None, 4, 750

    def closing_frame(self, delivered_from: int, dropped: int) -> bytes:
        raise AssertionError("a chat never sends tokenwire's closing frame")


def _wire(frames: ChatFrames, entries: list[str], cursor: int = -1, ending: EarlyEnd | None = None) -> bytes:
    """What a connection whose writer starts after ``cursor`` sends, as ``core.connection.serve`` asks for it."""
    stream = _Stream(len(entries), ending)
    body = frames.opening(stream, cursor)                                      # type: ignore[arg-type]
    body += b"".join(frames.token(TokenItem(index, entries[index])) for index in range(cursor + 1, len(entries)))
    return body + frames.closing(stream, cursor + 1, 0)                        # type: ignore[arg-type]


def _chunks(data: bytes) -> list[tuple[int, dict[str, Any]]]:
    events = Decoder().feed(data)
    assert events[-1].data == "[DONE]" and data.endswith(DONE)
    return [(int(event.id), json.loads(event.data)) for event in events[:-1]]


def test_every_part_of_an_answer_with_a_tool_is_its_chunks_numbered_in_order() -> None:
    assert _chunks(_wire(ChatFrames(0), ENTRIES)) == list(enumerate(WHOLE))


def test_chunk_count_counts_the_chunks_the_log_makes_with_and_without_the_ending() -> None:
    assert chunk_count(ENTRIES, ended=True, failed=False) == len(WHOLE)
    assert chunk_count(ENTRIES, ended=False, failed=False) == len(WHOLE) - 3     # text-end, finish-step, finish
    assert chunk_count(ENTRIES[:6], ended=False, failed=False) == 12               # up to the first argument delta
    assert chunk_count([], ended=True, failed=True) == 5                          # start .. error, finish-step, finish


@pytest.mark.parametrize("start", range(len(WHOLE) + 1))
def test_a_reader_starting_at_any_chunk_gets_exactly_the_rest(start: int) -> None:
    frames = ChatFrames(start)
    fed = frames.skip(ENTRIES, 0)
    got = _chunks(_wire(frames, ENTRIES, fed - 1))
    assert got == list(enumerate(WHOLE))[start:]


@pytest.mark.parametrize("start", range(len(WHOLE) + 1))
def test_a_resume_reads_the_prefix_in_batches_as_wanted_says_and_lands_where_a_whole_read_does(start: int) -> None:
    whole, batched = ChatFrames(start), ChatFrames(start)
    fed = 0
    while fed < len(ENTRIES):                      # what chat.py's reader does with the log
        batch = ENTRIES[fed:fed + batched.wanted(fed)]
        taken = batched.skip(batch, fed)
        if taken < fed + len(batch):
            fed = taken
            break
        fed = taken
    assert fed == whole.skip(ENTRIES, 0)
    assert _wire(batched, ENTRIES, fed - 1) == _wire(whole, ENTRIES, fed - 1)


def test_a_resume_inside_one_entrys_chunks_sends_that_entrys_remaining_chunks() -> None:
    # Chunk 6 is text-start, the second of the chunks of entry 2 ("Let me ": reasoning-end, text-start, delta).
    frames = ChatFrames(6)
    assert frames.skip(ENTRIES, 0) == 2
    first = frames.token(TokenItem(2, ENTRIES[2]))
    assert [n for n, _ in _chunks(first + DONE)] == [6, 7]
    # Chunk 12 is the second argument delta: the reader has the call's start and its first piece.
    middle = ChatFrames(12)
    assert middle.skip(ENTRIES, 0) == 6
    assert _chunks(middle.token(TokenItem(6, ENTRIES[6])) + DONE) == [(12, WHOLE[12])]


def test_a_text_only_stream_keeps_its_numbers_token_i_is_chunk_3_plus_i() -> None:
    tokens = ["Hello", ",", " world"]
    got = _chunks(_wire(ChatFrames(0), tokens))
    assert [(n, chunk["type"]) for n, chunk in got] == [
        (0, "start"), (1, "start-step"), (2, "text-start"), (3, "text-delta"), (4, "text-delta"), (5, "text-delta"),
        (6, "text-end"), (7, "finish-step"), (8, "finish")]
    assert got[-1][1] == {"type": "finish", "finishReason": "stop"}              # no usage: no messageMetadata
    assert ChatFrames(4).skip(tokens, 0) == 1


def test_a_text_after_a_step_or_a_tool_call_opens_a_new_block_with_a_new_id() -> None:
    entries = [parts.encode(p) for p in ("a", parts.Step(), "b", parts.ToolCallStart("c", "t"), "d")]
    got = [chunk for _, chunk in _chunks(_wire(ChatFrames(0), entries))]
    assert [(c["type"], c.get("id")) for c in got if c["type"].startswith("text")] == [
        ("text-start", "text-0"), ("text-delta", "text-0"), ("text-end", "text-0"),
        ("text-start", "text-1"), ("text-delta", "text-1"), ("text-end", "text-1"),
        ("text-start", "text-2"), ("text-delta", "text-2"), ("text-end", "text-2")]


@pytest.mark.parametrize(("part", "chunk"), [
    (parts.Refusal("I can't."), {"type": "text-delta", "id": "text-0", "delta": "I can't."}),
    (parts.ToolResult("c", error="timed out"), {"type": "tool-output-error", "toolCallId": "c",
                                                "errorText": "timed out"}),
    (parts.Source("d1", title="Report", media_type="application/pdf", filename="r.pdf"),
     {"type": "source-document", "sourceId": "d1", "mediaType": "application/pdf", "title": "Report",
      "filename": "r.pdf"}),
    (parts.Source("s2", url="https://example.org"), {"type": "source-url", "sourceId": "s2",
                                                     "url": "https://example.org"}),
    (parts.File("data:text/plain;base64,aGk=", "text/plain"), {"type": "file", "url": "data:text/plain;base64,aGk=",
                                                               "mediaType": "text/plain"}),
    (parts.Data("weather", {"city": "Paris"}, data_id="w1"), {"type": "data-weather", "data": {"city": "Paris"},
                                                             "id": "w1"}),
    (parts.Data("progress", 0.5), {"type": "data-progress", "data": 0.5}),
    ("\x00 a text that starts with NUL", {"type": "text-delta", "id": "text-0",
                                           "delta": "\x00 a text that starts with NUL"}),
])
def test_each_other_part_is_the_sdks_chunk(part: str | parts.Part, chunk: dict[str, Any]) -> None:
    got = [c for _, c in _chunks(_wire(ChatFrames(0), [parts.encode(part)]))]
    assert chunk in got


@pytest.mark.parametrize(("finish", "ending", "reason"), [
    ("tool_calls", None, "tool-calls"), ("content_filter", None, "content-filter"), ("length", None, "length"),
    ("stop", EarlyEnd("cancelled"), "other"), ("stop", EarlyEnd("error", "the model raised KeyError"), "error"),
])
def test_finish_says_the_models_reason_in_the_sdks_words_and_an_early_end_says_why(
        finish: str, ending: EarlyEnd | None, reason: str) -> None:
    entries = [parts.encode(parts.Reasoning("hm")), parts.encode(parts.Finish(finish))]
    got = [c for _, c in _chunks(_wire(ChatFrames(0), entries, ending=ending))]
    tail = [{"type": "reasoning-end", "id": "reasoning-0"}]
    if ending is not None and ending.error is not None:
        tail.append({"type": "error", "errorText": ending.error})
    assert got[-len(tail) - 2:] == [*tail, {"type": "finish-step"}, {"type": "finish", "finishReason": reason}]


def test_a_start_that_is_no_chunk_number_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"^start must be a chunk number >= 0, got -1$"):
        ChatFrames(-1)
