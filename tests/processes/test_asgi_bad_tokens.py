"""A model that yields a ``str`` UTF-8 cannot encode (a lone surrogate), on a real uvicorn, on the memory log and on
Redis: the stream ends with the ``error`` event naming what is wrong, logged once, the model closed, and a
reconnect replays the tokens and the same error."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from support.asgi import Uvicorn, read_stream, uvicorn
from support.live import wait_until
from support.redis import running_redis

MESSAGE = "the model yielded a str that is not valid UTF-8 (a lone surrogate at position 3) as token 2"


@pytest.fixture(params=["memory", "redis"])
def server(request: pytest.FixtureRequest) -> Iterator[Uvicorn]:
    if request.param == "memory":
        with uvicorn("support.apps.bad_tokens:app") as running:
            yield running
        return
    with running_redis() as redis_server:
        with uvicorn("support.apps.bad_tokens:app", env={"TOKENWIRE_TEST_LOG": redis_server.url}) as running:
            yield running


def test_a_lone_surrogate_token_ends_the_stream_with_failed_and_a_reconnect_replays_it(server: Uvicorn) -> None:
    made = httpx.post(f"{server.url}/tokens/streams?n=6&at=2")
    assert made.status_code == 201, made.text
    url = server.url + made.json()["events_url"]
    read = read_stream(url, timeout_s=5)
    assert read.status == 200 and read.ids == [0, 1] and read.text == " t0 t1"
    assert read.last.event == "failed" and read.last.id == "1"
    assert read.last_json() == {"error": MESSAGE, "tokens": 2}
    again = read_stream(url, headers={"Last-Event-ID": "0"}, timeout_s=5)      # the rest, then the same error
    assert again.ids == [1] and again.last.event == "failed" and again.last_json() == read.last_json()
    plain = read_stream(url, timeout_s=5)                                      # an EventSource's plain reconnect
    assert plain.ids == [0, 1] and plain.last_json() == read.last_json()
    last = read_stream(url, headers={"Last-Event-ID": "1"}, timeout_s=5)       # all it logged: the error again,
    assert last.status == 200 and last.ids == [] and last.last_json() == read.last_json()   # never a 204
    stream_id = made.json()["stream_id"]
    model = httpx.get(f"{server.url}/model/{stream_id}").json()
    assert model == {"yielded": 3, "closed": True}                            # asked no further, and closed
    wait_until(lambda: MESSAGE in server.stderr(), "the error in the server's log")
    assert server.stderr().count(MESSAGE) == 1
    assert "UnicodeEncodeError" not in server.stderr() and "stream process failed" not in server.stderr()
