"""The chat routes from Python: the UI message chunks and their numbers, the body, resume and its refusals,
on ``tokenwire serve`` and the ASGI app alike (the AI SDK's own clients are ``test_chat_sdk``'s)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from support.asgi import uvicorn
from support.live import serving

from tokenwire.core.frames import TokenItem
from tokenwire.core.model import ANSWER
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


@pytest.fixture(scope="module")
def bases() -> Iterator[list[str]]:
    with serving() as live, uvicorn("support.apps.chat:app") as app:
        yield [live.url, app.url + "/canned"]


def _post(base: str, **fields: Any) -> httpx.Response:
    return httpx.post(f"{base}/chat", content=json.dumps({"messages": [], **fields}), timeout=10)


def test_a_2_kb_history_is_taken_and_a_body_past_the_limit_is_413(bases: list[str]) -> None:
    history = [{"role": "user", "parts": [{"type": "text", "text": "x" * 100}]}] * 20
    for base in bases:
        answer = _post(base, messages=history, tokens=3, producer_ms=0.01)
        assert answer.status_code == 200 and answer.text.endswith("data: [DONE]\n\n")
        too_big = httpx.post(f"{base}/chat", content=b"{" + b" " * (1 << 20) + b"}", timeout=10)
        assert too_big.status_code == 413
        assert too_big.json() == {"error": f"request body of {(1 << 20) + 2} bytes; at most {1 << 20} are read"}


def test_the_post_names_its_stream_and_a_new_post_replaces_the_chats_stream(bases: list[str]) -> None:
    for base in bases:
        first = _post(base, id="regen", tokens=3, producer_ms=0.01)
        assert first.headers["x-vercel-ai-ui-message-stream"] == "v1"
        assert first.headers["content-type"].startswith("text/event-stream")
        second = _post(base, id="regen", tokens=4, producer_ms=0.01, trigger="regenerate-message")
        one, two = first.headers["x-workflow-run-id"], second.headers["x-workflow-run-id"]
        assert one != two
        tail = httpx.get(f"{base}/chat/regen/stream?startIndex=0", timeout=10)
        assert tail.headers["x-workflow-run-id"] == two and tail.text == second.text
        assert httpx.get(f"{base}/chat/{one}/stream?startIndex=0", timeout=10).text == first.text


def test_start_index_counts_chunks_and_a_negative_one_counts_from_the_tail(bases: list[str]) -> None:
    for base in bases:
        made = _post(base, tokens=5, producer_ms=0.01)
        stream_id, whole = made.headers["x-workflow-run-id"], chunks(made.content)
        assert len(whole) == PREAMBLE + 5 + 3 + 1
        for start in (0, 2, 5, PREAMBLE + 5 + 2, PREAMBLE + 5 + 3):
            again = httpx.get(f"{base}/chat/{stream_id}/stream?startIndex={start}", timeout=10)
            assert chunks(again.content)[:-1] == whole[start:-1]      # [DONE] carries no id of its own
            assert chunks(again.content)[-1][1] == "[DONE]"
            assert "x-workflow-stream-tail-index" not in again.headers
        tail = httpx.get(f"{base}/chat/{stream_id}/stream?startIndex=-2", timeout=10)
        assert tail.headers["x-workflow-stream-tail-index"] == str(PREAMBLE + 5 + 2)
        assert chunks(tail.content) == whole[-3:]                     # finish-step, finish, [DONE]
        assert [n for n, _ in whole] == [*map(str, range(PREAMBLE + 5 + 3)), str(PREAMBLE + 5 + 2)]
        by_id = httpx.get(f"{base}/chat/{stream_id}/stream", headers={"Last-Event-ID": "6"}, timeout=10)
        assert chunks(by_id.content) == whole[7:]                     # Last-Event-ID and startIndex agree
        assert "".join(c["delta"] for _, c in whole if isinstance(c, dict) and c["type"] == "text-delta") == \
            "".join(ANSWER[:5])


def test_last_event_id_wins_over_start_index_so_a_reconnect_gets_no_chunk_twice(bases: list[str]) -> None:
    # An EventSource (or tokenwire.client) reconnecting to a ?startIndex=0 URL sends the last chunk it has.
    for base in bases:
        made = _post(base, tokens=5, producer_ms=0.01)
        stream_id, whole = made.headers["x-workflow-run-id"], chunks(made.content)
        again = httpx.get(f"{base}/chat/{stream_id}/stream?startIndex=0", headers={"Last-Event-ID": "6"}, timeout=10)
        assert chunks(again.content) == whole[7:]


def test_a_last_event_id_past_the_end_is_refused_naming_the_header(bases: list[str]) -> None:
    # It was named 'startIndex 1000', a parameter the client never sent.
    for base in bases:
        stream_id = _post(base, tokens=5, producer_ms=0.01).headers["x-workflow-run-id"]
        answer = httpx.get(f"{base}/chat/{stream_id}/stream", headers={"Last-Event-ID": "999"}, timeout=10)
        assert (answer.status_code, answer.json()) == (
            400, {"error": "Last-Event-ID 999 is past the end: this stream has chunks 0..10 so far"})


@pytest.mark.parametrize(("target", "status", "message"), [
    ("/chat/{id}/stream?startIndex=12", 400, "startIndex 12 is past the end: this stream has chunks 0..10 so far"),
    ("/chat/{id}/stream?startIndex=x", 400, "startIndex must be a decimal integer without sign or leading zeros "
                                            "(at most 9 digits), got 'x'"),
    ("/chat/{id}/stream?since=1", 400, "a chat stream URL takes only startIndex, got 'since'"),
    ("/chat/{id}/stream?startIndex=-0", 400, "a negative startIndex is '-' and a count from 1 (at most 9 digits, "
                                             "no leading zeros), got '-0'"),      # it was read as 0: the whole
    ("/chat/{id}/stream?startIndex=--1", 400, "a negative startIndex is '-' and a count from 1 (at most 9 digits, "
                                              "no leading zeros), got '--1'"),    # quoted as '-1'
    ("/chat/{id}/stream?startIndex=-99999999999", 400, "a negative startIndex is '-' and a count from 1 (at most 9 "
                                                       "digits, no leading zeros), got '-99999999999'"),
    ("/chat/nobody-here/stream?startIndex=0", 404, None),
])
def test_a_bad_resume_is_refused_naming_why(bases: list[str], target: str, status: int, message: str | None) -> None:
    for base in bases:
        stream_id = _post(base, tokens=5, producer_ms=0.01).headers["x-workflow-run-id"]
        answer = httpx.get(base + target.format(id=stream_id), timeout=10)
        assert answer.status_code == status
        if message is not None:
            assert answer.json() == {"error": message}


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


def test_a_chat_stop_ends_its_readers_with_finish_on_both_servers(bases: list[str]) -> None:
    for base in bases:
        chat_id = f"stop-{len(base)}"
        fields = {"messages": [], "id": chat_id, "tokens": 277, "producer_ms": 20}
        with httpx.stream("POST", f"{base}/chat", content=json.dumps(fields), timeout=10) as answer:
            decoder, got = Decoder(), []
            for data in answer.iter_raw():
                got += [event.data for event in decoder.feed(data)]
                if len(got) == PREAMBLE + 2:                           # two deltas in: press Stop
                    stopped = httpx.post(f"{base}/chat/{chat_id}/stop", timeout=10)
                    assert stopped.status_code == 200
                    assert stopped.json() == {"stream_id": answer.headers["x-workflow-run-id"], "state": "stopped"}
        chunks_after = [json.loads(data) for data in got[:-1]]
        assert [c["type"] for c in chunks_after[-3:]] == ["text-end", "finish-step", "finish"]
        assert chunks_after[-1]["finishReason"] == "other" and got[-1] == "[DONE]"
        assert len(chunks_after) < PREAMBLE + 277 + 3                  # it stopped: not the whole answer
        assert httpx.post(f"{base}/chat/{chat_id}/stop", timeout=10).status_code == 200     # twice: harmless
        assert httpx.get(f"{base}/chat/{chat_id}/stream", timeout=10).status_code == 204    # nothing generating
        missing = httpx.post(f"{base}/chat/nobody-at-all/stop", timeout=10)
        assert missing.status_code == 404 and "unknown stream 'nobody-at-all'" in missing.json()["error"]
