"""``GET /chat/<id>/stream`` resuming a message with typed parts at every chunk number, by ``startIndex`` and by
``Last-Event-ID``, from the memory log and from another instance on one redis-server (uvicorn processes of
``support.apps.chat_tools``): each resume gets exactly the chunks after it, numbered as the first read numbered
them.  (The state machine alone: ``unit/test_ui_stream.py``; the AI SDK's clients: ``node/test_chat_parts.py``.)
"""

from __future__ import annotations

import json
from typing import Any

import httpx
from support.asgi import uvicorn
from support.redis import running_redis

from tokenwire.core.sse import Decoder

APP = "support.apps.chat_tools:app"
TIMEOUT_S = 10


def chunks(data: str) -> list[tuple[int, dict[str, Any]]]:
    events = Decoder().feed(data.encode())
    assert events[-1].data == "[DONE]"
    return [(int(event.id), json.loads(event.data)) for event in events[:-1]]


def _every_resume(post_to: str, resume_from: str) -> None:
    posted = httpx.post(f"{post_to}/tools/chat", json={"messages": [], "delay_ms": 0}, timeout=TIMEOUT_S)
    stream_id, whole = posted.headers["x-workflow-run-id"], chunks(posted.text)
    assert [n for n, _ in whole] == list(range(len(whole))) and whole[-1][1]["type"] == "finish"
    url = f"{resume_from}/tools/chat/{stream_id}/stream"
    for start in range(len(whole) + 1):
        by_index = httpx.get(f"{url}?startIndex={start}", timeout=TIMEOUT_S)
        assert chunks(by_index.text) == whole[start:], start
        by_header = httpx.get(url, headers={"last-event-id": str(start - 1)}, timeout=TIMEOUT_S) if start else None
        assert by_header is None or chunks(by_header.text) == whole[start:], start
    tail = httpx.get(f"{url}?startIndex=-3", timeout=TIMEOUT_S)
    assert tail.headers["x-workflow-stream-tail-index"] == str(len(whole) - 1)
    assert chunks(tail.text) == whole[-3:]
    past = httpx.get(f"{url}?startIndex={len(whole) + 1}", timeout=TIMEOUT_S)
    assert (past.status_code, past.json()) == (400, {"error": f"startIndex {len(whole) + 1} is past the end: this "
                                                              f"stream has chunks 0..{len(whole) - 1} so far"})


def test_every_chunk_number_resumes_to_exactly_the_rest_on_the_memory_log() -> None:
    with uvicorn(APP) as app:
        _every_resume(app.url, app.url)


def test_every_chunk_number_resumes_to_exactly_the_rest_on_another_instance_on_redis() -> None:
    with running_redis() as redis_server:
        env = {"TOKENWIRE_TEST_LOG": f"{redis_server.url}?block_ms=50"}
        with uvicorn(APP, env=env) as one, uvicorn(APP, env=env) as other:
            _every_resume(one.url, other.url)
