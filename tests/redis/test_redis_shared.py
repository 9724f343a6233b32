"""Canned streams on a shared log (SharedCanned) in one process: two instances (two logs, own owner ids), one Redis.

Each connection runs on its own event-loop driver (``support.private_loop``: a private loop on a thread, so
instances run side by side); the reader is
the core ``MemoryReader``.  The multi-process versions (real ``tokenwire
serve`` processes, SIGKILL) are in test_redis_instances.py.
"""

from __future__ import annotations

import threading

import pytest
from support.live import wait_until
from support.private_loop import Running, connect

from tokenwire.core.model import ANSWER, Model
from tokenwire.core.pipeline import RunSpec
from tokenwire.core.reader import MemoryReader
from tokenwire.core.stream import Ending, Stream
from tokenwire.core.tokenlog import LogUnavailable, MemoryTokenLog, StreamState, UnknownStream
from tokenwire.realtime import LoopDriver

N = 60


def _log(url, name, **settings):
    from tokenwire.redislog.blocking import RedisTokenLog
    settings.setdefault("lease_ms", 300)
    settings.setdefault("block_ms", 50)
    return RedisTokenLog(url, name=name, **settings)


def _spec(**kw):
    kw.setdefault("tokens", N)
    kw.setdefault("producer_ms", 1.0)
    return RunSpec(**kw)


def _owners(log, sid):
    return [by.split("/")[0] for _, _, by in log.entries(sid)]


def _assert_exact(reader, log, sid, n=N):
    assert reader.ids == list(range(n)), reader.ids
    assert "".join(reader.texts) == "".join(ANSWER[:n])
    assert [i for i, _, _ in log.entries(sid)] == list(range(n))      # each index logged once


def test_spec_round_trips_through_the_log_and_attach_needs_the_stream(redis_server):
    from tokenwire.endpoints.logs import attach_stream, new_stream
    from tokenwire.redislog.streams import SharedCanned
    a, b = _log(redis_server.url, "A"), _log(redis_server.url, "B")
    spec = _spec(policy="drop-oldest", capacity=7, seed=9, on_disconnect="detach", jitter=0.2)
    made = new_stream("s", spec, a)
    again = attach_stream("s", b)
    assert isinstance(made.source, SharedCanned) and isinstance(again.source, SharedCanned)
    assert (again.policy, again.capacity, again.on_disconnect, again.total) == (made.policy, 7, made.on_disconnect, N)
    assert [again.source.model.cost_ns(i) for i in range(N)] == [made.source.model.cost_ns(i) for i in range(N)]
    with pytest.raises(UnknownStream):
        attach_stream("nope", b)


def test_the_core_stream_runs_on_the_redis_log_alone(redis_server):
    log = _log(redis_server.url, "A")
    stream = Stream("s", Model(ANSWER[:N], _spec().timing()), log)
    reader, results = MemoryReader(), []
    connect(stream, reader, -1, results).join(30)
    assert results == [Ending.DONE]
    _assert_exact(reader, log, "s")
    assert log.state("s") is StreamState.DONE and log.owner("s") is None


def test_cut_on_a_resumed_on_b(redis_server):
    from tokenwire.endpoints.logs import attach_stream, new_stream
    a, b = _log(redis_server.url, "A"), _log(redis_server.url, "B")
    on_a = new_stream("s", _spec(), a)
    reader, results = MemoryReader(hang_up_after=20), []
    connect(on_a, reader, -1, results).join(30)         # A's reader hangs up: A's producer is cancelled
    assert results == [Ending.PEER_GONE] and reader.ids == list(range(20))
    assert a.state("s") is StreamState.CANCELLED and a.owner("s") is None
    on_b = attach_stream("s", b)
    connect(on_b, reader, reader.cursor, results).join(30)
    assert results[-1] is Ending.DONE
    _assert_exact(reader, b, "s")
    owners = _owners(b, "s")
    k = owners.index("B")
    assert owners == ["A"] * k + ["B"] * (N - k) and k >= 20
    assert on_a.source.model.total_steps + on_b.source.model.total_steps == N    # nothing generated twice


class FrozenModel:
    """Wraps a model so that generating ``index`` blocks until ``thaw`` is set: a stalled owner."""

    def __init__(self, model, index):
        self.inner, self.index, self.frozen, self.thaw = model, index, threading.Event(), threading.Event()

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def __len__(self):
        return len(self.inner)

    def generate(self, index):
        if index == self.index:
            self.frozen.set()
            self.thaw.wait(20)
        return self.inner.generate(index)


def test_a_stalled_owner_is_taken_over_and_fenced_off(redis_server):
    from tokenwire.endpoints.logs import attach_stream, new_stream
    a, b = _log(redis_server.url, "A"), _log(redis_server.url, "B")
    on_a = new_stream("s", _spec(), a)
    on_a.source.model = FrozenModel(on_a.source.model, 25)
    reader_a, reader_b, results_a, results_b = MemoryReader(), MemoryReader(), [], []
    threads_a = connect(on_a, reader_a, -1, results_a)
    assert on_a.source.model.frozen.wait(10)                    # A holds the lease and is stuck in step 25
    on_b = attach_stream("s", b)
    threads_b = connect(on_b, reader_b, 10, results_b)  # a reconnect lands on B: it follows, then takes over
    threads_b.join(30)
    on_a.source.model.thaw.set()                                # A wakes up; its append of 25 must be refused
    threads_a.join(30)
    assert results_a == results_b == [Ending.DONE]
    assert on_a.source.fenced == 1
    _assert_exact(reader_a, a, "s")
    assert reader_b.ids == list(range(11, N))
    owners = _owners(a, "s")
    assert owners == ["A"] * 25 + ["B"] * (N - 25)
    assert on_b.source.model.steps == {i: 1 for i in range(25, N)}


def test_reconnects_on_both_instances_at_once_generate_each_index_once(redis_server):
    from tokenwire.endpoints.logs import attach_stream, new_stream
    a, b = _log(redis_server.url, "A"), _log(redis_server.url, "B")
    on_a = new_stream("s", _spec(tokens=120, producer_ms=0.5), a)
    on_b = attach_stream("s", b)
    readers = [MemoryReader() for _ in range(4)]
    results: list[Ending] = []
    # One event loop per instance, as each server has; two readers on each.
    loops = {stream: LoopDriver.private() for stream in (on_a, on_b)}

    def connect(stream, reader):
        reader.begin_connection()

        def client():
            results.append((yield from stream.serve(-1, stream.new_channel())))
        loops[stream].spawn(client(), reader)

    connect(on_a, readers[0])
    connect(on_b, readers[1])
    connect(on_a, readers[2])      # a second reader on each instance follows the log
    connect(on_b, readers[3])
    for driver in [Running(d) for d in loops.values()]:
        driver.join(30)
    assert results == [Ending.DONE] * 4
    for reader in readers:
        assert reader.ids == list(range(120))
    assert [i for i, _, _ in a.entries("s")] == list(range(120))
    assert on_a.source.model.total_steps + on_b.source.model.total_steps == 120
    assert on_a.source.fenced == on_b.source.fenced == 0


def test_redis_restart_ends_the_stream_then_recovers(own_redis):
    from tokenwire.endpoints.logs import new_stream
    a = _log(own_redis.url, "A")
    on_a = new_stream("s", _spec(tokens=200, producer_ms=3.0), a)
    reader, results = MemoryReader(), []
    driver = connect(on_a, reader, -1, results)
    wait_until(lambda: len(reader.ids) >= 20, "the reader's 20th token")
    own_redis.stop()
    driver.join(30)                                       # the producer stops, the connection ends without done
    assert results == [Ending.REPLACED] and reader.done_at is None
    assert isinstance(on_a.source.failure, LogUnavailable) and not on_a.producer_running
    assert reader.ids == list(range(len(reader.ids)))     # a prefix, no gap, no duplicate
    with pytest.raises(LogUnavailable):
        connect(on_a, reader, reader.cursor, results).join(10)
    own_redis.start()                                      # back, empty (no persistence)
    with pytest.raises(UnknownStream):
        connect(on_a, reader, reader.cursor, results).join(10)
    fresh = new_stream("t", _spec(tokens=30), a)
    reader2, results2 = MemoryReader(), []
    connect(fresh, reader2, -1, results2).join(30)
    assert results2 == [Ending.DONE]
    _assert_exact(reader2, a, "t", 30)


class _Calls:
    """An asyncio twin of the log whose calls a hand-stepped producer is answered for (no Redis here); the
    lane's appends are kept in ``appended``."""

    class log:  # noqa: N801 - the twin's ``log`` attribute: only its keys are asked for
        @staticmethod
        def keys(stream_id):
            return (f"{stream_id}:meta", f"{stream_id}:tokens", f"{stream_id}:lease")

    def __init__(self):
        self.appended = []
        self.writer = self                  # the loop's writer: ``append_then`` keeps what it is given
        self.closed = False

    def append_then(self, *args):
        self.appended.append(args)

    def __getattr__(self, name):
        return lambda *args, **kwargs: (name, args)


def test_a_canned_stream_a_reader_found_lost_ends_lost_not_done():
    """A follower's writer finds the log lost the stream (``lose``) while the owner's producer is mid-Put: the
    producer ends there, without marking the stream done or taking the "lost" ending away."""
    from tokenwire.core.channel import Outcome
    from tokenwire.core.effects import Await, Put, RunLogged, Sleep
    from tokenwire.redislog.replies import Claim
    from tokenwire.redislog.streams import SharedCanned

    log = MemoryTokenLog(lambda: 0)
    stream = Stream("s", SharedCanned(Model(ANSWER[:3], _spec().timing()), _Calls()), log)   # type: ignore[arg-type]
    producer = stream.source.produce(stream, 0)
    effect = next(producer)
    assert isinstance(effect, Await) and effect.awaitable[0] == "claim"
    assert isinstance(producer.send(Claim(owned=True, length=0, owner="A")), RunLogged)
    assert isinstance(producer.send(0), Sleep)        # the driver took none (the simulation): a step at a time
    assert producer.send(None).awaitable[0] == "append_future"
    assert isinstance(producer.send(None), Put)                       # token 0 goes to the reader
    stream.lose(1)                                                    # a reader's writer: the log lost the stream
    with pytest.raises(StopIteration):
        producer.send(Outcome.ACCEPTED)                               # nothing more: no set_state(done)
    assert stream.ending is not None and stream.ending.reason == "lost"
    assert b'"reason": "lost"' in stream.closing_frame(0, 0)


def test_an_owner_whose_producer_a_log_error_stopped_follows_the_log_on_the_next_reader():
    """The model's iterator is closed with the failed producer; the next reader on the owner's process follows
    the log (a continuation elsewhere, or ``owner lost`` after a lease), never ends the stream itself."""
    import asyncio

    from tokenwire.asgi.shared_model import SharedModel
    from tokenwire.core.effects import Await
    from tokenwire.redislog.replies import Claim

    async def model():
        for token in ("a", "b"):
            yield token

    async def scenario():
        stream = Stream("s", SharedModel(model(), _Calls()), MemoryTokenLog(lambda: 0))   # type: ignore[arg-type]
        producer = stream.source.produce(stream, 0)
        assert next(producer).awaitable[0] == "claim"
        step = producer.send(Claim(owned=True, length=0, owner="A"))
        step = producer.send(await step.awaitable)                       # the model's first token
        assert step.awaitable[0] == "append_future"
        step = producer.throw(LogUnavailable("token log unavailable: redis down"))
        assert isinstance(step, Await)
        with pytest.raises(LogUnavailable):
            producer.send(await step.awaitable)                          # the iterator closed, then the error
        again = stream.source.produce(stream, 0)                         # a reader reconnects on this process
        return next(again).awaitable[0], stream.ending

    first, ending = asyncio.run(scenario())
    assert (first, ending) == ("wait_after", None)


def test_the_owner_s_lane_stops_where_a_reader_found_the_log_lost_the_stream():
    """As above, with the driver's lane taking the tokens (``RunLogged``): token 0 is logged and offered, then a
    reader finds the stream lost; the lane stops before token 1 and the producer ends without ``done``."""
    from tokenwire.core.effects import RunLogged
    from tokenwire.redislog.replies import Claim
    from tokenwire.redislog.streams import SharedCanned

    log = MemoryTokenLog(lambda: 0)
    stream = Stream("s", SharedCanned(Model(ANSWER[:3], _spec().timing()), _Calls()), log)   # type: ignore[arg-type]
    producer = stream.source.produce(stream, 0)
    next(producer)
    run = producer.send(Claim(owned=True, length=0, owner="A"))
    assert isinstance(run, RunLogged) and (run.index, run.end) == (0, 3)
    got = []
    run.steps.start(0, got.append)                 # generated, its append queued (on the stand-in: kept)
    (appended,) = stream.source.aio.appended
    assert appended[:4] == ("s", _Calls.log.keys("s"), 0, ANSWER[0])
    assert got == [] and stream.offered == -1      # nothing offered before the round acknowledges it
    appended[4].set_result(None)                   # the round: logged, its Then tells the driver's call
    assert got == [None] and stream.offered == -1
    assert tuple(run.steps.landed()) == (0, ANSWER[0]) and stream.offered == 0     # the driver takes it
    run.index = 1
    assert not run.steps.cancelled
    stream.lose(1)
    assert run.steps.cancelled                     # the driver times no token 1
    with pytest.raises(StopIteration):
        producer.send(run.index)                   # the lane's end: nothing more, no set_state(done)
    assert stream.ending is not None and stream.ending.reason == "lost"
