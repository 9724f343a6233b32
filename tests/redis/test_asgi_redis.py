"""Model streams on a shared (Redis) log: two uvicorn processes serving ``tokenwire.asgi:app`` on one Redis
(``TOKENWIRE_LOG_URL``), a stream started on one resumed on the other, to the exact text, each id once (Redis is
this test's own redis-server); and a model stream whose lease cannot be taken (Redis down) ends its reader.
"""

from __future__ import annotations

import asyncio
import signal

import httpx
from support.asgi import read_stream, uvicorn
from support.live import TIMEOUT_S
from support.redis import running_redis, until_logged

from tokenwire.asgi.shared_model import shared_model_stream
from tokenwire.core.channel import Policy
from tokenwire.core.clock import RealClock
from tokenwire.core.model import ANSWER
from tokenwire.core.sources import OnDisconnect
from tokenwire.core.tokenlog import LogUnavailable
from tokenwire.realtime import LoopDriver


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


def _redis_env(url: str) -> dict[str, str]:
    # A short lease so that a dead owner is noticed within a second.
    return {"TOKENWIRE_TEST_LOG": f"{url}?lease_ms=400&block_ms=50"}


def test_your_own_model_on_redis_is_followed_by_another_process_while_it_generates() -> None:
    with running_redis() as redis_server:
        env = _redis_env(redis_server.url)
        with (uvicorn("support.apps.fake_model:app", env=env) as one,
              uvicorn("support.apps.fake_model:app", env=env) as other):
            made = httpx.post(f"{one.url}/tokens/streams?n=40&delay_ms=30")
            assert made.status_code == 201
            url = made.json()["events_url"]
            assert url.startswith("/tokens/streams/")
            first = read_stream(one.url + url, stop_after=8)           # the reader leaves; detach: it goes on
            rest = read_stream(other.url + url, headers={"Last-Event-ID": first.tokens[-1].id})
            stats = httpx.get(f"{one.url}/model/{made.json()['stream_id']}").json()
    assert first.ids == list(range(8))
    assert rest.ids == list(range(8, 40)) and rest.last.event == "done"
    assert first.text + rest.text == "".join(f" t{i}" for i in range(40))
    assert "stopped_early" not in rest.last_json()
    assert stats["steps"] == 40 and stats["finished"]                   # generated once, on its owner only


def test_your_own_model_ends_early_on_another_process_when_its_owner_dies() -> None:
    with running_redis() as redis_server:
        env = _redis_env(redis_server.url)
        with (uvicorn("support.apps.fake_model:app", env=env) as one,
              uvicorn("support.apps.fake_model:app", env=env) as other):
            made = httpx.post(f"{one.url}/tokens/streams?n=400&delay_ms=20")
            url = made.json()["events_url"]
            first = read_stream(one.url + url, stop_after=5)
            until_logged(redis_server.url, made.json()["stream_id"], 8)   # detached: the owner logs on meanwhile
            one.stop(signal.SIGKILL)                                    # then dies mid-generation
            rest = read_stream(other.url + url, headers={"Last-Event-ID": first.tokens[-1].id}, timeout_s=20)
    assert rest.status == 200 and rest.ids and rest.ids == list(range(5, 5 + len(rest.ids)))
    assert len(rest.ids) + 5 < 400
    assert rest.last.event == "done" and rest.last_json()["stopped_early"] is True
    assert rest.last_json()["reason"] == "owner lost" and rest.last_json()["tokens"] == 5 + len(rest.ids)


class _DownLog:
    """A shared log whose Redis is down: every call of its asyncio twin fails."""

    class aio:  # noqa: N801 - the attribute name the stream reads
        class log:  # noqa: N801
            lease_ms = 3000

        @staticmethod
        async def length(*args: object) -> int:
            return 0

        @staticmethod
        async def read_after(*args: object) -> list[str]:
            return []

        @staticmethod
        async def claim(*args: object) -> None:
            raise LogUnavailable("redis down")

        @staticmethod
        async def set_state(*args: object) -> None:
            raise LogUnavailable("redis down")


class _Frames:
    def __init__(self) -> None:
        self.frames: list[bytes] = []

    def send(self, frame: bytes, resume: object) -> bool:
        self.frames.append(frame)
        return True


def test_a_model_stream_whose_lease_cannot_be_taken_ends_its_reader() -> None:
    async def model():  # type: ignore[no-untyped-def]
        for token in ("a", "b"):
            yield token

    async def scenario() -> tuple[bool, bool, list[bytes]]:
        driver = LoopDriver(asyncio.get_running_loop(), RealClock(), on_error=lambda exc: None)
        stream = shared_model_stream("m", model(), _DownLog(), policy=Policy.BLOCK, capacity=4,  # type: ignore[arg-type]
                                     on_disconnect=OnDisconnect.DETACH)
        wire = _Frames()
        writer = driver.spawn(stream.serve(-1, stream.new_channel(), heartbeat_ns=50_000_000), wire)
        await asyncio.wait({writer}, timeout=TIMEOUT_S)         # the reader's end, whatever it raised
        return writer.done(), stream.producer_running, wire.frames

    done, running, frames = asyncio.run(scenario())
    assert done and not running
    assert b"event: done" not in b"".join(frames) and b": ping" not in b"".join(frames)
