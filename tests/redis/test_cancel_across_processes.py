"""Cancel across processes: two uvicorn processes on one real redis-server serve the
``on_disconnect="cancel"`` app; the stream is made (and its model run) on ``one``.  Every process with a
reader attached holds a presence entry the owner reads, so:

- the only reader, on ``other``, leaves: the owner stops its model within one step (the factory's yields are
  counted by the app), and a reconnect gets the early-stop ``done``;
- a reader on ``one`` leaves while one on ``other`` still reads: nothing is cancelled, ``other``'s reader gets
  the whole answer and the plain ``done``;
- ``other`` dies with its reader attached (SIGKILL): its presence runs out a lease later and the owner stops.

Each on both event loops (uvicorn's ``--loop``).
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from support.asgi import Uvicorn, read_stream, uvicorn
from support.live import await_until, wait_until
from support.redis import redis_command, running_redis, stream_keys

# A short lease, so that a dead process's presence runs out within half a second.
LOG_QUERY = "lease_ms=400&block_ms=50"


@pytest.fixture
def two_on_redis(loop_kind: str) -> Iterator[tuple[Uvicorn, Uvicorn, str]]:
    """Two uvicorn processes on one redis-server, and that server's URL."""
    with running_redis() as redis_server:
        env = {"TOKENWIRE_TEST_LOG": f"{redis_server.url}?{LOG_QUERY}"}
        with (uvicorn("support.apps.fake_model:app", env=env) as one,
              uvicorn("support.apps.fake_model:app", env=env) as other):
            yield one, other, redis_server.url


@pytest.fixture
def two(two_on_redis: tuple[Uvicorn, Uvicorn, str]) -> tuple[Uvicorn, Uvicorn]:
    return two_on_redis[0], two_on_redis[1]


def _create(owner: Uvicorn, query: str) -> tuple[str, str]:
    made = httpx.post(f"{owner.url}/cancel/streams?{query}")
    assert made.status_code == 201, made.text
    return made.json()["stream_id"], made.json()["events_url"]


def _model(owner: Uvicorn, stream_id: str) -> dict[str, int | bool]:
    return dict(httpx.get(f"{owner.url}/model/{stream_id}").json())


class Following:
    """A reader of ``url`` on a thread, to the end; ``started`` is set once it has its first token."""

    def __init__(self, url: str) -> None:
        self.body, self.started, self.error = b"", threading.Event(), None
        self.thread = threading.Thread(target=self._read, args=(url,), daemon=True)
        self.thread.start()

    def _read(self, url: str) -> None:
        try:
            with httpx.Client(timeout=20) as client, client.stream("GET", url) as response:
                for chunk in response.iter_bytes():
                    self.body += chunk
                    if b"event: token" in self.body:
                        self.started.set()
        except httpx.HTTPError as exc:
            self.error = exc
        finally:
            self.started.set()

    def ids(self) -> list[int]:
        return [int(line[4:]) for line in self.body.decode().splitlines() if line.startswith("id: ")]


def test_the_only_reader_leaving_on_another_process_stops_the_model_within_one_step(
        two: tuple[Uvicorn, Uvicorn]) -> None:
    one, other = two
    stream_id, url = _create(one, "n=100&delay_ms=100")
    read = read_stream(other.url + url, stop_after=5)                  # the only reader, on the other process
    assert read.ids == list(range(5))
    wait_until(lambda: _model(one, stream_id)["closed"], "the owner to stop the model")
    model = _model(one, stream_id)
    # When the reader left, the owner had logged 5 tokens (6 if the next landed meanwhile): it finishes the
    # step under way, and is stopped before the next, or during it.
    assert not model["finished"] and 5 <= int(model["yielded"]) <= 7, model
    assert int(model["steps"]) <= int(model["yielded"]) + 1, model
    again = read_stream(other.url + url, headers={"Last-Event-ID": "4"})
    logged = 5 + len(again.ids)
    assert again.ids == list(range(5, logged)) and logged == model["yielded"]
    assert again.last_json() == {"tokens": logged, "delivered_from": 5, "dropped": 0, "stopped_early": True,
                                 "reason": "cancelled"}      # as the owner's own readers are told


def test_a_reader_leaving_one_process_never_ends_a_reader_on_another(two: tuple[Uvicorn, Uvicorn]) -> None:
    one, other = two
    stream_id, url = _create(one, "n=100&delay_ms=10")
    following = Following(other.url + url)
    assert following.started.wait(10) and following.error is None
    left = read_stream(one.url + url, stop_after=9)                    # a reader on the owner's process leaves
    assert left.ids == list(range(9))
    following.thread.join(20)
    assert not following.thread.is_alive() and following.error is None
    assert following.ids()[:-1] == list(range(100)) and following.ids()[-1] == 99      # then `done` with id 99
    assert b"event: done" in following.body and b"stopped_early" not in following.body
    assert _model(one, stream_id) == {"steps": 100, "yielded": 100, "finished": True, "closed": True}


def test_a_reader_whose_process_dies_is_given_up_a_lease_later(two_on_redis: tuple[Uvicorn, Uvicorn, str]) -> None:
    import redis

    from tokenwire.redislog.presence import readers_key
    one, other, redis_url = two_on_redis
    stream_id, url = _create(one, "n=300&delay_ms=20")
    readers = readers_key(stream_keys(redis_url, stream_id)[0])
    following = Following(other.url + url)
    assert following.started.wait(10) and following.error is None
    # B's presence goes to Redis in B's next round, not before its reader's first token: kill B only once it is
    # there (a process killed before its presence landed was never seen reading, and its stream is not deserted)
    with redis.Redis.from_url(redis_url) as plain:
        wait_until(lambda: plain.zcard(readers) > 0, "B's reader presence in Redis")
    other.stop(signal.SIGKILL)                                         # its reader is never seen leaving
    following.thread.join(20)
    wait_until(lambda: _model(one, stream_id)["closed"], "the owner to stop the model")
    model = _model(one, stream_id)
    assert not model["finished"] and int(model["yielded"]) < 300, model
    assert int(model["steps"]) <= int(model["yielded"]) + 1, model


def test_presence_joins_leaves_is_renewed_and_runs_out(loop_kind: str) -> None:
    """The presence scripts on a real redis-server, two processes' logs: never read is not deserted; deserted
    once the last reader anywhere leaves; an entry renewed on the timer stays, one no longer renewed runs out."""
    from tokenwire.core.clock import RealClock
    from tokenwire.realtime import new_loop
    from tokenwire.redislog.presence import readers_key
    from tokenwire.redislog.streams import open_log

    async def redis_now_ms(log: Any) -> float:
        seconds, micros = await log.aio.command("TIME")
        return int(seconds) * 1000 + int(micros) / 1000

    async def scene(a: Any, b: Any) -> list[tuple[str, bool]]:
        seen: list[tuple[str, bool]] = []
        await a.aio.create("s", {"model": "asgi"}, 100)
        seen.append(("never read", await a.aio.deserted("s")))
        await a.aio.attend("s")
        await b.aio.attend("s")
        joined = float(str(redis_command(a.url, "ZSCORE", readers_key(a.keys("s")[0]), b.owner_id)))
        seen.append(("A leaves, B reads", await a.aio.leave("s")))

        async def past_first_lease() -> bool:          # B's entry as it joined has run out, by Redis's clock
            return await redis_now_ms(a) > joined
        await await_until(past_first_lease, "Redis's clock to pass the lease B joined with")
        seen.append(("B renewed", await a.aio.deserted("s")))
        b.aio.writer.renewal.unattend("s")                     # B stops renewing (as a process that died)
        await await_until(lambda: a.aio.deserted("s"), "Redis to let B's entry run out")
        seen.append(("B ran out", True))
        await b.aio.attend("s")
        seen.append(("B again", await a.aio.deserted("s")))
        seen.append(("B leaves", await b.aio.leave("s")))
        await a.aio.close()
        await b.aio.close()
        return seen

    with running_redis() as redis_server:
        a, b = (open_log(f"{redis_server.url}?lease_ms=300", RealClock().now) for _ in range(2))
        loop = new_loop()
        try:
            seen = loop.run_until_complete(asyncio.wait_for(scene(a, b), 20))
        finally:
            loop.close()
    assert seen == [("never read", False), ("A leaves, B reads", False), ("B renewed", False), ("B ran out", True),
                    ("B again", False), ("B leaves", True)]
