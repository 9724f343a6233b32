"""A reconnect tells how a stream ended: a reconnect to a stream that was cancelled, cut by the
server's ``cut_after`` with ``on_disconnect="cancel"``, or that failed gets that stream's ending (200 and the
ending frame), never the 204 that tells an ``EventSource`` it has a whole answer; a stream that ended normally
still gets 204 from a reader that has every token.  On the memory log, on Redis through the process that made
the stream, and on Redis through another process; each on both event loops (uvicorn's ``--loop``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from support.asgi import Read, Uvicorn, read_stream, uvicorn
from support.live import wait_until
from support.redis import running_redis

WHERE = ["memory", "redis, same process", "redis, other process"]


@dataclass
class Pair:
    """``owner`` makes the streams; ``reader`` is where the reconnects go (the owner itself but on Redis's other)."""

    owner: Uvicorn
    reader: Uvicorn
    same: bool


@pytest.fixture(params=WHERE)
def pair(request: pytest.FixtureRequest, loop_kind: str) -> Iterator[Pair]:
    with contextlib.ExitStack() as stack:
        if request.param == "memory":
            one = stack.enter_context(uvicorn("support.apps.fake_model:app"))
            yield Pair(one, one, True)
            return
        redis_server = stack.enter_context(running_redis())
        env = {"TOKENWIRE_TEST_LOG": f"{redis_server.url}?lease_ms=400&block_ms=50"}
        one = stack.enter_context(uvicorn("support.apps.fake_model:app", env=env))
        if request.param == "redis, same process":
            yield Pair(one, one, True)
            return
        yield Pair(one, stack.enter_context(uvicorn("support.apps.fake_model:app", env=env)), False)


def _create(pair: Pair, mount: str, query: str) -> tuple[str, str]:
    made = httpx.post(f"{pair.owner.url}{mount}/streams?{query}")
    assert made.status_code == 201, made.text
    return made.json()["stream_id"], made.json()["events_url"]


def _model(pair: Pair, stream_id: str) -> dict[str, object]:
    return dict(httpx.get(f"{pair.owner.url}/model/{stream_id}").json())


def _reconnect(pair: Pair, url: str, last: int) -> Read:
    return read_stream(pair.reader.url + url, headers={"Last-Event-ID": str(last)})


def _logged(pair: Pair, url: str) -> int:
    """How many tokens the stopped stream logged, as its ending says (read whole from the start)."""
    whole = read_stream(pair.reader.url + url)
    assert whole.status == 200 and whole.last.event in ("done", "failed"), whole
    assert whole.ids == list(range(len(whole.ids)))
    tokens = whole.last_json()["tokens"]
    assert tokens == len(whole.ids)
    return int(tokens)


def _assert_early_done(read: Read, pair: Pair, logged: int) -> None:
    assert read.status == 200, read.status                  # not 204: the reader does not have a whole answer
    assert read.ids == [] and read.last.event == "done" and read.last.id == str(logged - 1)
    # The same ending on every instance: a cancel is "cancelled" on the other process too (it said "stopped",
    # a stop nobody asked for, and an OpenAI response there was "cancelled" where its owner said "incomplete").
    assert read.last_json() == {"tokens": logged, "delivered_from": logged, "dropped": 0, "stopped_early": True,
                                "reason": "cancelled"}


# How the only reader leaves a cancel stream: it hangs up after 5 tokens, or the server cuts it after 4.
LEAVING = {"the reader hangs up": ("n=200&delay_ms=20", 5), "the server cuts": ("n=200&delay_ms=20&cut_after=4", None)}


@pytest.mark.parametrize("leaving", LEAVING)
def test_a_reconnect_after_a_cancel_gets_the_early_done_not_204(pair: Pair, leaving: str) -> None:
    query, stop_after = LEAVING[leaving]
    stream_id, url = _create(pair, "/cancel", query)
    first = read_stream(pair.owner.url + url, stop_after=stop_after)
    read = len(first.ids)
    assert first.ids == list(range(read)) and read in (4, 5) and first.last.event == "token"
    wait_until(lambda: _model(pair, stream_id).get("closed"), "the cancelled model to be closed")
    logged = _logged(pair, url)
    assert read <= logged < 200
    _assert_early_done(_reconnect(pair, url, logged - 1), pair, logged)


def test_a_reconnect_after_a_failure_gets_failed_again_not_204(pair: Pair) -> None:
    _, url = _create(pair, "/tokens", "n=10&delay_ms=1&mode=raise&at=3")
    failed = read_stream(pair.owner.url + url)
    assert failed.ids == [0, 1, 2] and failed.last.event == "failed"
    again = _reconnect(pair, url, 2)                                 # it has ids 0..2, all that was logged
    assert again.status == 200 and again.ids == [] and again.last.id == "2"
    # On every process: the other one read the log's cancelled state as an early stop ("another process
    # knows that it stopped, not why"); the failure's message is in the log now.
    assert again.last.event == "failed"
    assert again.last_json() == {"error": "the model raised RuntimeError", "tokens": 3}

def test_a_stream_that_ended_normally_gets_204_from_a_reader_with_every_token(pair: Pair) -> None:
    _, url = _create(pair, "/cancel", "n=10&delay_ms=1")
    whole = read_stream(pair.owner.url + url)
    assert whole.ids == list(range(10)) and whole.last.event == "done" and "stopped_early" not in whole.last_json()
    done = httpx.get(pair.reader.url + url, headers={"Last-Event-ID": "9"})
    assert (done.status_code, done.content) == (204, b"")
    assert _reconnect(pair, url, 8).ids == [9]
