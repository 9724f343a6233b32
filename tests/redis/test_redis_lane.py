"""The owner's tokens on a shared log as the driver's lane (``RunLogged``): one timer callback a token, told by
the writer's round itself, and still never sent before Redis holds it.

Each reader here asks Redis, from its own connection, how long the stream's log is at the moment each token
reaches it: a token delivered before its round was acknowledged would find the log shorter than its index.
"""

from __future__ import annotations

import redis
from support.private_loop import connect
from support.redis import admin

from tokenwire.core.model import ANSWER
from tokenwire.core.pipeline import RunSpec
from tokenwire.core.reader import MemoryReader
from tokenwire.core.stream import Ending, Stream
from tokenwire.redislog.writer import LogWriter

N = 80


class LogCheckingReader(MemoryReader):
    """A MemoryReader that reads the log's last entry at every delivery (``seen``: index -> the log's length then,
    from the entry's id)."""

    def __init__(self, url: str, tokens_key: str) -> None:
        super().__init__()
        self.raw, self.key, self.seen = redis.Redis.from_url(admin(url)), tokens_key, {}

    def deliver(self, frame: bytes, now: int) -> bool:
        before = len(self.ids)
        taken = super().deliver(frame, now)
        if len(self.ids) > before:
            last = self.raw.xrevrange(self.key, count=1)     # entry ids are <epoch>-<index + 1>
            length = int(last[0][0].split(b"-")[1]) if last else 0
            for index in self.ids[before:]:
                self.seen[index] = length
        return taken


def _log(url: str):
    from tokenwire.redislog.blocking import RedisTokenLog
    return RedisTokenLog(url, name="lane", lease_ms=2000, block_ms=50)


def _stream(log) -> Stream:
    from tokenwire.endpoints.logs import new_stream
    return new_stream("s", RunSpec(tokens=N, producer_ms=1.0), log)


def test_each_token_reaches_the_reader_only_once_redis_holds_it(redis_server):
    log = _log(redis_server.url)
    stream = _stream(log)
    reader, results = LogCheckingReader(redis_server.url, log.keys("s")[1]), []
    connect(stream, reader, -1, results).join(30)
    assert results == [Ending.DONE]
    assert reader.ids == list(range(N)) and "".join(reader.texts) == "".join(ANSWER[:N])
    assert sorted(reader.seen) == list(range(N))
    early = {i: length for i, length in reader.seen.items() if length < i + 1}
    assert not early, f"tokens sent before their append landed (index: log length): {early}"


def test_the_owner_appends_through_the_round_with_no_future_per_token(redis_server, monkeypatch):
    futures, told = [], []
    append, append_then = LogWriter.append, LogWriter.append_then

    def counted_append(self, stream_id, index, token):
        futures.append(index)
        return append(self, stream_id, index, token)

    def counted_then(self, stream_id, keys, index, token, then, head=b""):
        told.append((index, type(then).__name__, head.endswith(keys[1].encode() + b"\r\n$10\r\nNOMKSTREAM\r\n")))
        return append_then(self, stream_id, keys, index, token, then, head)
    monkeypatch.setattr(LogWriter, "append", counted_append)
    monkeypatch.setattr(LogWriter, "append_then", counted_then)
    log = _log(redis_server.url)
    stream = _stream(log)
    reader, results = MemoryReader(), []
    connect(stream, reader, -1, results).join(30)
    assert results == [Ending.DONE] and reader.ids == list(range(N))
    assert futures == []                                  # no append awaited through a future
    assert told == [(i, "Then", True) for i in range(N)]  # each told by the round that carried it, in order
    assert [i for i, _, _ in log.entries("s")] == list(range(N))


def test_a_driver_that_takes_no_lane_still_gets_every_token_logged_first(redis_server, monkeypatch):
    """The simulation answers a ``RunLogged`` with its own index ("took none"): the producer then takes a Sleep,
    an Await of the append and a Put a token itself.  A driver refusing lanes shows that path still exact."""
    from tokenwire.core.effects import RunLogged
    from tokenwire.realtime.lanes import Lanes
    begin, refused = Lanes.begin, []

    def no_logged_lane(self, p, run):
        if type(run) is not RunLogged:
            return begin(self, p, run)
        refused.append(run.index)
        return self._step(p, run.index, None)         # resumes the process with the index it gave: none taken
    monkeypatch.setattr(Lanes, "begin", no_logged_lane)
    log = _log(redis_server.url)
    stream = _stream(log)
    reader, results = LogCheckingReader(redis_server.url, log.keys("s")[1]), []
    connect(stream, reader, -1, results).join(30)
    assert refused == [0]                               # asked once, then never again
    assert results == [Ending.DONE] and reader.ids == list(range(N))
    assert not {i for i, length in reader.seen.items() if length < i + 1}


def test_a_round_s_time_is_sent_to_answered_not_the_tellings_after(redis_server):
    """``tokenwire_log_round_seconds`` is a round trip: the lane's tellings (the hand-over, the writes) run in the
    round after its replies came, and a slow one must not show as Redis's latency.  Each append's asker here
    takes 0.2 s; the round is counted, exactly once, under 0.1 s."""
    import asyncio
    import time

    from tokenwire.redislog.blocking import RedisTokenLog
    from tokenwire.redislog.rounds import Then

    log = RedisTokenLog(redis_server.url, name="T")

    async def scene() -> tuple[list[object], object]:
        aio = log.aio
        await aio.create("r", {}, 10)
        assert (await aio.claim("r")).owned
        told: list[object] = []
        done = asyncio.get_running_loop().create_future()

        def slow(error: BaseException | None) -> None:
            time.sleep(0.2)                          # a telling that holds the loop
            told.append(error)
            if len(told) == 3:
                done.set_result(None)
        writer = aio.writer                          # this loop's
        before = writer.figures.times.count
        for index in range(3):
            writer.append_then("r", log.keys("r"), index, f"t{index}", Then(slow))
        await asyncio.wait_for(done, 10)
        figures = writer.figures
        aio.disown("r")
        await aio.close()
        return told, (figures.times.count - before, figures.appended, figures.times.sum_ns)

    try:
        told, (rounds, appended, total_ns) = asyncio.run(scene())
    finally:
        log.close()
    assert told == [None, None, None]
    assert appended == 3 and rounds >= 1
    assert total_ns < 100_000_000, f"the rounds took {total_ns / 1e6:.0f} ms in all: the tellings were counted"


def test_a_lane_whose_log_was_closed_appends_through_the_loop_s_new_writer(redis_server):
    """``AsyncRedisLog.close`` (a server stopping its log before its streams) leaves a lane's cached writer
    closed: the next token is appended through the writer the log makes again, and the closed one opens no
    connection again."""
    import asyncio

    from tokenwire.endpoints.logs import new_stream
    from tokenwire.redislog.streams import LoggedSteps

    log = _log(redis_server.url)
    stream = new_stream("c", RunSpec(tokens=4, producer_ms=1.0), log)

    async def scene() -> tuple[list[object], bool, bool]:
        aio = log.aio
        assert (await aio.claim("c")).owned
        steps = LoggedSteps(stream.source.model, aio, stream)
        told: list[object] = []
        landed = asyncio.Event()

        def done(error: BaseException | None) -> None:
            told.append(error)
            landed.set()
        first = aio.writer
        steps.start(0, done)
        await asyncio.wait_for(landed.wait(), 10)
        steps.landed()
        await aio.close()                           # the log closed under the lane
        assert (await aio.claim("c")).owned         # the log is used again: a new writer, the lease taken again
        landed.clear()
        steps.start(1, done)
        await asyncio.wait_for(landed.wait(), 10)
        second = aio.writer
        again = second is not first and not first.links
        aio.disown("c")
        await aio.close()
        return told, again, first.closed
    try:
        told, again, closed = asyncio.run(scene())
        assert [i for i, _, _ in log.entries("c")] == [0, 1]
    finally:
        log.close()
    assert told == [None, None] and again and closed


def test_a_bug_under_the_owner_ends_its_reader_with_failed_and_says_so_in_the_log(redis_server, monkeypatch):
    """The canned model's step 5 raises (a bug, not a log error): the reader here gets tokens 0-4 and then
    ``failed`` naming the error's type, not heartbeats for ever; the log says cancelled, with that failure, and
    the lease is let go; the error itself goes to the driver (the private run raises it)."""
    import pytest

    from tokenwire.core.model import Model
    from tokenwire.core.tokenlog import StreamState
    generate = Model.generate

    def failing(self, index):
        if index == 5:
            raise ZeroDivisionError("a bug with a secret in its text")
        return generate(self, index)
    monkeypatch.setattr(Model, "generate", failing)
    log = _log(redis_server.url)
    stream = _stream(log)
    reader, results = MemoryReader(), []
    with pytest.raises(ZeroDivisionError):
        connect(stream, reader, -1, results).join(30)
    assert reader.ids == list(range(5))
    last = reader.frames[-1][-1]                   # the connection's last frame
    assert last.startswith(b"id: 4\nevent: failed\n"), last
    assert b'"the model raised ZeroDivisionError"' in last and b"secret" not in last
    assert log.state("s") is StreamState.CANCELLED
    assert log.failure("s") == "the model raised ZeroDivisionError"
    assert log.owner("s") is None
