"""A stream whose tokens Redis lost (a key evicted under memory pressure) on a real ``redis-server``.

What is asserted: a stream an owner has claimed whose tokens key is gone (``DEL`` here; eviction under real
``allkeys-lru`` pressure in test_redis_eviction.py) is *lost*: every claim, take-over, read and append says
``StreamLost`` and the key is never made again (never generated from index 0, never continued from a shorter
prefix), and a key made again shorter than where the current epoch began is lost too; a resume gets 410, a
fresh reader too, and a reader that is reading gets the early-stop ``done`` with ``"reason": "lost"``, on
``tokenwire serve`` (both event loops) and with a user's model on ``TokenStreams``; with the meta gone too the
stream is unknown (404).
"""

from __future__ import annotations

import contextlib
import json
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest
from support.asgi import Read, Uvicorn, read_stream, uvicorn
from support.instances import Instance, create, log_at, request
from support.live import await_until, wait_until
from support.private_loop import connect
from support.redis import redis_command, run_scene, running_redis

from tokenwire.core.model import ANSWER
from tokenwire.core.tokenlog import StreamLost, UnknownStream
from tokenwire.endpoints import rules

if TYPE_CHECKING:
    from tokenwire.redislog.blocking import RedisTokenLog

# How long a reader waits for another to have a token.
IO_WAIT_S = 10.0
LOST = ("stream 's' was lost: the token log no longer holds its tokens (Redis evicted them, or went back past "
        "what a reader was sent); it cannot be resumed or generated again")


async def _three_tokens_by(log, sid: str = "s") -> None:
    """Create ``sid`` and log three tokens as its claimed owner; the lease is let go."""
    await log.aio.create(sid, {}, 10)
    await log.aio.claim(sid)
    for i in range(3):
        await log.aio.append(sid, i, f"t{i}")
    await log.aio.release(sid)


@pytest.fixture(params=["asyncio", "uvloop"])
def loop_kind(request, monkeypatch):
    if request.param == "uvloop":
        pytest.importorskip("uvloop", reason="uvloop (the 'fast' extra) is not installed")
    monkeypatch.setenv("TOKENWIRE_LOOP", request.param)
    return request.param


async def _calls(log, sid: str) -> list[str]:
    """What each log call on ``sid`` answers: the value's type or the error's."""
    out = []
    calls = [("claim", log.aio.claim(sid)), ("take_over", log.aio.take_over(sid)), ("info", log.aio.info(sid)),
             ("snapshot", log.aio.snapshot(sid, -1)), ("read_after", log.aio.read_after(sid, 2)),
             ("append", log.aio.append(sid, 3, "x"))]
    for name, call in calls:
        try:
            await call
            out.append(f"{name}: ok")
        except Exception as exc:  # noqa: BLE001 - what the call says is the point
            out.append(f"{name}: {type(exc).__name__}")
    log.aio.disown(sid)
    return out


def test_a_claimed_stream_whose_tokens_key_is_gone_is_lost_and_never_made_again(redis_server, loop_kind):
    a, b = log_at(redis_server.url, "A"), log_at(redis_server.url, "B")
    meta, tokens, lease = a.keys("s")

    async def scene():
        await _three_tokens_by(a)
        await a.aio.claim("s")
        await a.aio.command("DEL", tokens)
        with pytest.raises(StreamLost) as owned:
            await a.aio.append("s", 3, "t3")              # the owner's plain XADD: refused, and why
        await a.aio.release("s")
        seen = {"A": await _calls(a, "s"), "B": await _calls(b, "s")}
        exists = await a.aio.command("EXISTS", tokens)
        await a.aio.command("DEL", meta)                  # the meta gone too: an unknown stream
        with pytest.raises(UnknownStream):
            await b.aio.info("s")
        with pytest.raises(UnknownStream):
            await b.aio.claim("s")
        for log in (a, b):
            await log.aio.close()
        return str(owned.value), seen, exists

    message, seen, exists = run_scene(scene)
    assert message == LOST
    lost = ["claim: StreamLost", "take_over: StreamLost", "info: StreamLost", "snapshot: StreamLost",
            "read_after: StreamLost", "append: StreamLost"]
    assert seen == {"A": lost, "B": lost}
    assert exists == 0                                     # nobody made the key again
    a.close()
    b.close()


def test_a_tokens_key_made_again_shorter_than_its_epoch_began_is_lost(redis_server, loop_kind):
    """The fence moved the key's last id to where B's epoch began (index 3); a key made again since (by an
    instance of a version that made it again) is shorter: lost, never continued from the shorter prefix."""
    a, b = log_at(redis_server.url, "A", lease_ms=200), log_at(redis_server.url, "B", lease_ms=200)
    _, tokens, lease = a.keys("s")

    async def scene():
        await _three_tokens_by(a)
        assert (await b.aio.claim("s")).epoch == 2
        await b.aio.release("s")
        await a.aio.command("DEL", tokens)
        await a.aio.command("XADD", tokens, "1-1", "t", "again")          # a shorter key, one entry
        with pytest.raises(StreamLost):
            await b.aio.claim("s")
        with pytest.raises(StreamLost):
            await b.aio.read_after("s", -1)
        for log in (a, b):
            await log.aio.close()

    run_scene(scene)
    a.close()
    b.close()


def test_a_lost_stream_is_answered_410():
    refusal = rules.log_error(StreamLost("s"))
    assert (refusal.status, refusal.message) == (410, LOST)
    assert json.loads(rules.error_body(refusal.message)) == {"error": LOST}


# -- tokenwire serve: two processes on one Redis -----------------------------------------------------------
def _lost_message(events_url: str) -> str:
    return LOST.replace("'s'", repr(events_url.split("/")[-2]))


def _refusals(events: str, *instances) -> list[tuple[str, int | None, int, str]]:
    """What a fresh reader and a resume get from each instance: (instance, Last-Event-ID, status, error)."""
    out = []
    for inst in instances:
        for last in (None, 5):
            reply = request(inst.port, "GET", events, last_event_id=last)
            out.append((inst.name, last, reply.status, reply.json()["error"]))
    return out


@contextlib.contextmanager
def _serving(url: str, loop: str) -> Iterator[tuple[Instance, Instance]]:
    """Two ``tokenwire serve`` processes on ``url``'s Redis, on the ``loop`` event loop."""
    if loop == "uvloop":
        pytest.importorskip("uvloop", reason="uvloop (the 'fast' extra) is not installed")
    a = Instance(url, "A", loop)
    try:
        b = Instance(url, "B", loop)
        try:
            yield a, b
        finally:
            b.kill()
    finally:
        a.kill()


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_serve_a_stream_whose_tokens_are_evicted_mid_answer_ends_its_readers_and_answers_410(redis_server, loop):
    with _serving(redis_server.url, loop) as (a, b):
        _evicted_mid_answer(redis_server.url, a, b)


def _evicted_mid_answer(url: str, a: Instance, b: Instance) -> None:
    log = log_at(url, "test")
    events = create(a, "tokens=200&producer_ms=10")
    tokens_key = log.keys(events.split("/")[2])[1]
    following = threading.Event()
    followed: list = []
    follower = threading.Thread(target=lambda: followed.append(
        request(b.port, "GET", events, on_token=lambda r: following.set())))      # a reader on B follows A

    def on_token(reply) -> None:
        if len(reply.ids) == 5:
            follower.start()
        if len(reply.ids) == 20:
            assert following.wait(IO_WAIT_S)
            redis_command(url, "DEL", tokens_key)                             # Redis loses the tokens

    owner = request(a.port, "GET", events, on_token=on_token)
    follower.join(IO_WAIT_S)
    assert not follower.is_alive()
    for reply in (owner, followed[0]):
        assert reply.status == 200 and reply.done
        assert reply.ids == list(range(len(reply.ids))) and reply.texts == list(ANSWER[:len(reply.ids)])
        assert reply.ending == {"tokens": len(reply.ids), "delivered_from": 0, "dropped": 0,
                                "stopped_early": True, "reason": "lost"}
    assert 20 <= len(owner.ids) < 200 and len(followed[0].ids) <= len(owner.ids) + 1
    lost = _lost_message(events)
    assert _refusals(events, a, b) == [("A", None, 410, lost), ("A", 5, 410, lost), ("B", None, 410, lost),
                                       ("B", 5, 410, lost)]
    assert redis_command(url, "EXISTS", tokens_key) == 0                      # never made again
    log.close()


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_serve_a_finished_stream_whose_tokens_are_evicted_answers_410_and_404_once_its_meta_goes(redis_server,
                                                                                                 loop):
    with _serving(redis_server.url, loop) as (a, b):
        _evicted_when_finished(redis_server.url, a, b)


def _evicted_when_finished(url: str, a: Instance, b: Instance) -> None:
    log = log_at(url, "test")
    events = create(a, "tokens=30&producer_ms=1")
    assert request(a.port, "GET", events).done
    meta, tokens, _ = log.keys(events.split("/")[2])
    redis_command(url, "DEL", tokens)
    lost = _lost_message(events)
    assert _refusals(events, a, b) == [("A", None, 410, lost), ("A", 5, 410, lost), ("B", None, 410, lost),
                                       ("B", 5, 410, lost)]
    redis_command(url, "DEL", meta)
    assert {(status, "never created here" in error) for _, _, status, error in _refusals(events, a, b)} == {
        (404, True)}
    log.close()


# -- a user's model: TokenStreams on two uvicorn processes ---------------------------------------------------
@contextlib.contextmanager
def _two_apps(calls: Path) -> Iterator[tuple[RedisTokenLog, Uvicorn, Uvicorn]]:
    """A Redis of its own, a log on it for the test, and two uvicorn processes serving ``support.apps.serverless``."""
    with running_redis() as redis_server:
        log = log_at(redis_server.url, "test")
        env = {"TOKENWIRE_TEST_LOG": f"{redis_server.url}?lease_ms=400&block_ms=50",
               "TOKENWIRE_TEST_CALLS": str(calls)}
        try:
            with (uvicorn("support.apps.serverless:app", env=env) as one,
                  uvicorn("support.apps.serverless:app", env=env) as other):
                yield log, one, other
        finally:
            log.close()


def _made(url: str) -> dict:
    """POST ``url`` (a create) until it is answered 201, its body returned.  A fresh process's first calls to Redis
    may be answered 503 with Retry-After on a machine as busy as CI (each waits at most 1 s for Redis); those
    are asked again, and any other answer fails, saying what it was."""
    said: list[httpx.Response] = []

    def created() -> dict | None:
        reply = httpx.post(url)
        said.append(reply)
        if reply.status_code == 503:
            return None
        assert reply.status_code == 201, (reply.status_code, reply.text)
        return dict(reply.json())
    return wait_until(created, lambda: f"a create answered 201 (the last: {said[-1].status_code} {said[-1].text})",
                      20)


def _evict(log: RedisTokenLog, stream_id: str) -> None:
    redis_command(log.url, "DEL", log.keys(stream_id)[1])


def _factory_calls(path: Path, stream_id: str) -> list[int]:
    """The ``start`` of every call of the model factory for ``stream_id``, on any process."""
    lines = path.read_text().splitlines() if path.exists() else []
    return [call["start"] for call in map(json.loads, lines) if call["stream_id"] == stream_id]


def _lost_ending(read: Read) -> dict:
    assert read.status == 200 and read.last.event == "done", read.events[-3:]
    assert read.ids == list(range(len(read.ids))) and read.text == "".join(f" t{i}" for i in range(len(read.ids)))
    return read.last_json()


@pytest.mark.parametrize("app", ["continued", "ended"])
def test_a_model_whose_tokens_are_evicted_while_it_generates_ends_every_reader_with_lost(tmp_path, app):
    calls = tmp_path / "calls.jsonl"
    with _two_apps(calls) as (log, one, other):
        made = _made(f"{one.url}/{app}/streams?n=300&delay_ms=20")
        url = made["events_url"]
        following, there = threading.Event(), []
        follower = threading.Thread(target=lambda: there.append(request(
            other.port, "GET", url, on_token=lambda r: len(r.ids) == 5 and following.set())))
        follower.start()                                            # a reader on the other process follows
        here = read_stream(one.url + url, stop_after=10)
        assert following.wait(IO_WAIT_S)
        _evict(log, made["stream_id"])                              # Redis loses the tokens
        rest = read_stream(one.url + url, headers={"Last-Event-ID": here.tokens[-1].id}, timeout_s=20)
        follower.join(20)
        resumed = httpx.get(other.url + url, headers={"Last-Event-ID": "3"})
        fresh = httpx.get(one.url + url)
    assert rest.status == 410 or _lost_ending(rest)["reason"] == "lost"     # the owner may be told first
    followed = there[0]
    assert followed.status == 200 and followed.done and 5 <= len(followed.ids) < 300
    assert followed.ids == list(range(len(followed.ids)))
    assert followed.texts == [f" t{i}" for i in range(len(followed.ids))]
    assert followed.ending == {"tokens": len(followed.ids), "delivered_from": 0, "dropped": 0,
                               "stopped_early": True, "reason": "lost"}
    assert (resumed.status_code, fresh.status_code) == (410, 410)
    assert resumed.json() == {"error": _lost_message(url)}
    assert _factory_calls(calls, made["stream_id"]) == [0]                   # never called again


def test_a_model_whose_owner_died_and_whose_tokens_are_evicted_is_not_continued_from_index_0(tmp_path):
    """The case that was wrong: a take-over found length 0 and called the factory again with start=0."""
    calls = tmp_path / "calls.jsonl"
    with _two_apps(calls) as (log, one, other):
        made = _made(f"{one.url}/continued/streams?n=300&delay_ms=20")
        url = other.url + made["events_url"]
        first = read_stream(url, stop_after=10)
        one.stop(signal.SIGKILL)
        _evict(log, made["stream_id"])
        rest = httpx.get(url, headers={"Last-Event-ID": first.tokens[-1].id})
        fresh = httpx.get(url)
    assert (rest.status_code, fresh.status_code) == (410, 410)
    assert _factory_calls(calls, made["stream_id"]) == [0]


def test_a_finished_model_stream_whose_tokens_are_evicted_is_410_never_an_empty_done(tmp_path):
    with _two_apps(tmp_path / "calls.jsonl") as (log, one, _):
        made = _made(f"{one.url}/ended/streams?n=12&delay_ms=1")
        whole = read_stream(one.url + made["events_url"])
        _evict(log, made["stream_id"])
        again = httpx.get(one.url + made["events_url"])
    assert whole.ids == list(range(12)) and whole.last_json()["tokens"] == 12
    assert again.status_code == 410 and again.json() == {"error": _lost_message(made["events_url"])}


@pytest.mark.parametrize("cursor", [-1, 9])
def test_a_reader_attaching_to_a_lost_stream_gets_the_lost_ending_not_a_silent_close(redis_server, cursor):
    """The writer's own attach finds the loss (a request decided just before it): open, then the early-stop
    done with reason lost, at the reader's cursor."""
    from tokenwire.core.pipeline import RunSpec
    from tokenwire.core.reader import MemoryReader
    from tokenwire.core.stream import Ending
    from tokenwire.endpoints.logs import attach_stream, new_stream
    a, b = log_at(redis_server.url, "A", lease_ms=300, block_ms=50), log_at(redis_server.url, "B", block_ms=50)
    whole, results = MemoryReader(), []
    connect(new_stream("s", RunSpec(tokens=30, producer_ms=1.0), a), whole, -1, results).join(30)
    stream = attach_stream("s", b)                         # known to B before the key goes
    redis_command(redis_server.url, "DEL", b.keys("s")[1])
    late = MemoryReader(last_event_id="" if cursor < 0 else str(cursor))
    connect(stream, late, cursor, results).join(30)
    assert whole.ids == list(range(30)) and results == [Ending.DONE, Ending.DONE]
    assert [e.event for e in late.events] == ["open", "done"] and late.ids == []
    assert json.loads(late.events[-1].data) == {"tokens": cursor + 1, "delivered_from": cursor + 1, "dropped": 0,
                                                "stopped_early": True, "reason": "lost"}
    assert stream.total == cursor + 1
    a.close()
    b.close()


def test_an_owner_whose_stream_meta_is_evicted_stops_appending(redis_server, loop_kind):
    """The renewal lets such a stream go, so the owner's next append is checked and refused as unknown
    (before, its plain XADDs went on landing in a tokens key nobody could read)."""
    a = log_at(redis_server.url, "A", lease_ms=150)
    meta, tokens, _ = a.keys("s")

    async def scene():
        await _three_tokens_by(a)
        await a.aio.claim("s")
        await a.aio.command("DEL", meta)
        await await_until(lambda: "s" not in a.aio.writer.renewal.owned,    # a renewal (every 50 ms)
                          "the renewal to let the stream go")
        with pytest.raises(UnknownStream):
            await a.aio.append("s", 3, "t3")
        length = redis_command(a.url, "XLEN", tokens)
        a.aio.disown("s")
        await a.aio.close()
        return length

    assert run_scene(scene) == 3
    a.close()
