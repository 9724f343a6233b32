"""The chat route's parts without a socket: the UI message chunks and their numbers (``ChatFrames``), a stop's and
a failure's last chunks, a reader starting at chunk n, the body's parse and its refusals, and a continued chat's
request as the log keeps it.  (Over HTTP on both servers: ``processes/test_chat_routes.py``.)"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tokenwire.core.frames import TokenItem
from tokenwire.core.sse import Decoder
from tokenwire.endpoints.chat import parse_chat
from tokenwire.endpoints.params import RequestError
from tokenwire.endpoints.ui_stream import PREAMBLE, ChatFrames


class _Ended:
    def __init__(self, reason: str, error: str | None = None) -> None:
        self.reason, self.error = reason, error


class _Stream:
    """What a rendering reads of a stream."""

    def __init__(self, total: int, ending: _Ended | None = None) -> None:
        self.stream_id, self.total, self.ending = "S", total, ending
        self.policy, self.capacity, self.retry_ms = None, 4, 750

    def closing_frame(self, delivered_from: int, dropped: int) -> bytes:
        raise AssertionError("a chat never sends tokenwire's closing frame")


def chunks(data: bytes) -> list[tuple[str, Any]]:
    """(id, JSON or the raw data) of each event, decoded by tokenwire's own decoder."""
    events = Decoder().feed(data)
    return [(event.id, event.data if event.data == "[DONE]" else json.loads(event.data)) for event in events]


def test_a_whole_message_is_numbered_chunk_by_chunk() -> None:
    frames, stream = ChatFrames(0), _Stream(2)
    wire = frames.opening(stream, -1) + frames.token(TokenItem(0, "A")) + frames.token(TokenItem(1, ' "b"\n'))
    wire += frames.closing(stream, 0, 0)                      # type: ignore[arg-type]
    assert chunks(wire) == [
        ("0", {"type": "start", "messageId": "msg-S"}), ("1", {"type": "start-step"}),
        ("2", {"type": "text-start", "id": "text-0"}),
        ("3", {"type": "text-delta", "id": "text-0", "delta": "A"}),
        ("4", {"type": "text-delta", "id": "text-0", "delta": ' "b"\n'}),
        ("5", {"type": "text-end", "id": "text-0"}), ("6", {"type": "finish-step"}),
        ("7", {"type": "finish", "finishReason": "stop"}), ("7", "[DONE]")]


@pytest.mark.parametrize(("ending", "tail"), [
    (_Ended("cancelled"), [{"type": "text-end", "id": "text-0"}, {"type": "finish-step"},
                           {"type": "finish", "finishReason": "other"}]),
    (_Ended("error", "the model raised KeyError"),
     [{"type": "text-end", "id": "text-0"}, {"type": "error", "errorText": "the model raised KeyError"},
      {"type": "finish-step"}, {"type": "finish", "finishReason": "error"}]),
])
def test_a_stop_ends_with_finish_and_a_failure_with_the_sdks_error_chunk(ending: _Ended,
                                                                         tail: list[dict[str, Any]]) -> None:
    frames = ChatFrames(0)
    frames.token(TokenItem(0, "A"))
    got = chunks(frames.closing(_Stream(1, ending), 0, 0))   # type: ignore[arg-type]
    assert got == [*((str(n), chunk) for n, chunk in enumerate(tail, PREAMBLE + 1)), (str(PREAMBLE + len(tail)),
                                                                                       "[DONE]")]


def test_the_first_chunk_of_a_connection_carries_the_streams_retry() -> None:
    stream = _Stream(2)
    whole = ChatFrames(0).opening(stream, -1)                                              # type: ignore[arg-type]
    assert whole.startswith(b"retry: 750\nid: 0\ndata: {") and whole.count(b"retry:") == 1
    events = Decoder().feed(whole)
    assert [(event.retry, event.id) for event in events] == [(750, "0"), (750, "1")]   # the time it set
    assert ChatFrames(1).opening(stream, -1).startswith(b"retry: 750\nid: 1\n")  # type: ignore[arg-type]
    assert ChatFrames(2).opening(stream, -1) == b""       # no block with only `retry`: no phantom event


def test_a_reader_starting_at_chunk_n_gets_chunks_n_on() -> None:
    stream, entries = _Stream(4), ["a", "b", "c", "d"]
    assert [n for n, _ in chunks(ChatFrames(1).opening(stream, -1))] == ["1"]              # type: ignore[arg-type]
    assert ChatFrames(2).opening(stream, -1) == b""                                        # type: ignore[arg-type]
    assert [ChatFrames(n).skip(entries, 0) - 1 for n in (0, 3, 4, 9)] == [-1, -1, 0, 3]   # the writer's cursor
    frames = ChatFrames(PREAMBLE + 4 + 2)
    assert frames.skip(entries, 0) == 4
    assert [n for n, _ in chunks(frames.closing(stream, 0, 0))] == ["9", "9"]            # type: ignore[arg-type]


@pytest.mark.parametrize(("body", "message"), [
    (b"{", "a chat body must be JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"),
    (b"[]", "a chat body must be a JSON object, got list"),
    (b'{"id": "c"}', 'a chat body needs "messages", a list, got \'null\''),
    (b'{"messages": [], "id": 7}', "a chat body's 'id' must be a string, got '7'"),
    (b'{"messages": [], "id": "a/b"}', "a chat id is 1 to 64 letters, digits, '-' or '_', got 'a/b'"),
])
def test_a_bad_chat_body_is_a_400_that_names_what_is_wrong(body: bytes, message: str) -> None:
    with pytest.raises(RequestError) as caught:
        parse_chat(body)
    assert (caught.value.status, caught.value.message) == (400, message)


def test_a_chat_body_is_read_whole() -> None:
    chat = parse_chat(b'{"id": "c1", "messages": [{"role": "user"}], "trigger": "submit-message", "x": 1}')
    assert (chat.chat_id, chat.messages, chat.trigger, chat.message_id) == ("c1", ({"role": "user"},),
                                                                           "submit-message", None)
    assert chat.body["x"] == 1
    assert parse_chat(b'{"messages": []}').chat_id is None                # WorkflowChatTransport names no chat


def test_a_continued_chat_gets_its_chat_again() -> None:
    """A follower continuing a chat's model (takeover="continue") calls the factory with the same ``chat``."""
    from tokenwire.asgi.model_stream import StreamRequest
    from tokenwire.asgi.shared_model import REQUEST_KEY, request_from_meta, request_to_meta

    body = b'{"id": "c9", "messages": [{"role": "user"}], "trigger": "submit-message", "n": 3}'
    made = StreamRequest("S", {}, body, "127.0.0.1", chat=parse_chat(body))
    kept = json.loads(json.dumps({REQUEST_KEY: request_to_meta(made)}))      # as the log keeps it
    assert request_from_meta("S", kept) == made
    plain = StreamRequest("S", {"n": "3"}, b"", "127.0.0.1")
    assert request_from_meta("S", {REQUEST_KEY: request_to_meta(plain)}) == plain
