"""Two uvicorn processes serving ``tokenwire.asgi:app`` on one Redis (``TOKENWIRE_LOG_URL``): a stream started
on one is resumed on the other, to the exact text, each id once.  Redis is this test's own redis-server."""

from __future__ import annotations

import httpx
from asgi_helpers import read_stream, uvicorn
from redis_fixture import running_redis

from tokenwire.core.model import ANSWER


def test_a_stream_started_on_one_process_resumes_on_the_other() -> None:
    with running_redis() as redis_server:
        env = {"TOKENWIRE_LOG_URL": redis_server.url}
        with uvicorn("tokenwire.asgi:app", env=env) as one, uvicorn("tokenwire.asgi:app", env=env) as other:
            made = httpx.post(f"{one.url}/streams?tokens=60&producer_ms=1&cut_after=20")
            assert made.status_code == 201
            url = made.json()["events_url"]
            first = read_stream(one.url + url)
            rest = read_stream(other.url + url, headers={"Last-Event-ID": first.tokens[-1].id})
            assert first.ids + rest.ids == list(range(60))
            assert first.text + rest.text == "".join(ANSWER[:60])
            assert rest.last.event == "done"
            assert httpx.get(other.url + url, headers={"Last-Event-ID": "59"}).status_code == 204
