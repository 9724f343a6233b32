"""The chat routes over HTTP, on ``tokenwire serve`` (in this process) and the ASGI app under uvicorn alike: a 2 KB
history taken and a body past the limit a 413, the POST naming its stream and a new POST replacing the chat's,
``startIndex`` and ``Last-Event-ID`` resumes and their refusals, and a stop ending every reader with ``finish``.
(The chunks themselves and the body's parse: ``unit/test_chat.py``; the AI SDK's own clients:
``node/test_chat_sdk.py``.)
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from support.asgi import uvicorn
from support.live import serving

from tokenwire.core.model import ANSWER
from tokenwire.core.sse import Decoder
from tokenwire.endpoints.ui_stream import PREAMBLE


def chunks(data: bytes) -> list[tuple[str, Any]]:
    """(id, JSON or the raw data) of each event, decoded by tokenwire's own decoder."""
    events = Decoder().feed(data)
    return [(event.id, event.data if event.data == "[DONE]" else json.loads(event.data)) for event in events]


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
