"""The event-loop driver (``tokenwire.realtime``) and its parts: timers, the parking lot, wires, the private loop.

The same processes are also run on the simulation here, to check that a
``Put``/``Get`` (``tokenwire.core.exchange``) decides the same under both.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from tokenwire.core.channel import Outcome, Taken
from tokenwire.core.clock import RealClock
from tokenwire.core.effects import TIMEOUT, Await, Get, Process, Put, Sleep
from tokenwire.core.frames import TokenItem
from tokenwire.core.model import ANSWER, Model, TimingModel
from tokenwire.core.pipeline import RunSpec, run
from tokenwire.core.reader import MemoryReader
from tokenwire.core.simulate import Simulation
from tokenwire.core.stream import Stream
from tokenwire.core.tokenlog import MemoryTokenLog
from tokenwire.realtime import LOOP_ENV, LoopDriver, LoopWire, loop_name
from tokenwire.realtime.parking import ParkingLot
from tokenwire.realtime.procs import Proc
from tokenwire.realtime.timers import TICK_NS, Timers
from tokenwire.realtime.wires import split


def _stream(policy: str = "block", capacity: int = 3, tokens: int = 10) -> Stream:
    return Stream("s", Model(ANSWER[:tokens], TimingModel()), MemoryTokenLog(lambda: 0), policy=policy,
                  capacity=capacity)


def _turns(loop: asyncio.AbstractEventLoop, n: int = 1) -> None:
    """Let ``loop`` run what is scheduled now, ``n`` turns."""
    for _ in range(n):
        loop.run_until_complete(asyncio.sleep(0))


def _idle_proc(loop: asyncio.AbstractEventLoop) -> Proc:
    def never() -> Process:
        yield Sleep(0)
    return Proc(never(), None, 0, loop.create_future())


# -- moved here: the driver's pacing and heartbeat ------------------------------------------------
def test_a_long_await_is_not_a_pacing_debt_repaid_in_a_burst() -> None:
    driver = LoopDriver.private()
    stamps: list[int] = []

    def proc() -> Process:
        yield Await(asyncio.sleep(0.3))
        stamps.append(driver.clock.now())
        for _ in range(3):
            yield Sleep(50_000_000)
        stamps.append(driver.clock.now())

    driver.spawn(proc())
    driver.run()
    assert stamps[1] - stamps[0] >= 140_000_000           # three 50 ms steps after the wait, not at once


def test_a_heartbeat_timeout_is_not_restarted_by_other_wake_ups():
    stream = Stream("h", Model(ANSWER[:3], TimingModel()), MemoryTokenLog(lambda: 0))
    channel = stream.new_channel()
    stream.connect(-1, channel)          # nothing is produced: the channel stays empty
    state = {"stop": False, "wakes": 0}

    def notify_forever():                # wake-ups meant for someone else, every 5 ms, for up to 5 s
        for _ in range(1000):
            if state["stop"]:
                return
            yield Sleep(5_000_000)
            stream.wake()
            state["wakes"] += 1

    def waiter():
        got = yield Get(stream, channel, timeout_ns=50_000_000)
        state["stop"] = True
        return got

    driver = LoopDriver.private()
    result = driver.spawn(waiter())
    driver.spawn(notify_forever())
    driver.run()
    assert result.result() is TIMEOUT and 3 <= state["wakes"] < 1000, "the timeout fired while wake-ups kept coming"


# -- timers ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("precise", [False, True])
def test_timers_fire_in_deadline_order_whatever_the_order_asked(precise: bool) -> None:
    loop, clock = asyncio.new_event_loop(), RealClock()
    try:
        timers: Timers[str] = Timers(loop, clock.now, precise)
        fired: list[tuple[str, int]] = []
        start = clock.now()
        deadlines = {"c": start + 9 * TICK_NS, "a": start + 3 * TICK_NS, "past": start - TICK_NS,
                     "b": start + 6 * TICK_NS}
        all_fired = loop.create_future()

        def fire(name: str) -> None:
            fired.append((name, clock.now()))
            if len(fired) == len(deadlines):
                all_fired.set_result(None)
        for name, deadline in deadlines.items():
            timers.at(deadline, fire, name)
        loop.run_until_complete(asyncio.wait_for(all_fired, 5))
    finally:
        loop.close()
    assert [name for name, _ in fired] == ["past", "a", "b", "c"]
    if precise:                          # the last stretch is spun: never early
        assert all(t >= deadlines[name] for name, t in fired)


def test_a_servers_deadlines_in_one_tick_share_a_loop_timer_and_keep_their_order() -> None:
    loop, clock = asyncio.new_event_loop(), RealClock()
    try:
        loop_timers: list[float] = []
        call_later = loop.call_later

        def counted(delay: float, *args: object) -> asyncio.TimerHandle:
            loop_timers.append(delay)
            return call_later(delay, *args)  # type: ignore[arg-type]

        loop.call_later = counted  # type: ignore[method-assign]
        timers: Timers[int] = Timers(loop, clock.now, precise=False)
        fired: list[int] = []
        all_fired = loop.create_future()

        def fire(i: int) -> None:
            fired.append(i)
            if len(fired) == 10:
                all_fired.set_result(None)
        due = (clock.now() // TICK_NS + 5) * TICK_NS        # the start of a tick 4-5 ticks away
        for i in range(10):
            timers.at(due - i * 1000, fire, i)              # ten deadlines within one tick, latest first
        assert len(loop_timers) == 1
        loop.run_until_complete(asyncio.wait_for(all_fired, 5))
    finally:
        loop.close()
    assert fired == list(range(10))


# -- the parking lot ------------------------------------------------------------------------------
def test_a_parked_get_is_woken_with_the_item_once_its_stream_rings() -> None:
    loop, clock = asyncio.new_event_loop(), RealClock()
    try:
        woken: list[tuple[Proc, object]] = []
        lot = ParkingLot(loop, clock.now, lambda p, value: woken.append((p, value)))
        stream = _stream()
        channel = stream.new_channel()
        stream.connect(-1, channel)
        p = _idle_proc(loop)
        lot.park(p, Get(stream, channel), clock.now())
        _turns(loop, 2)
        assert woken == [] and p.since >= 0, "nothing rang: still parked"
        item = TokenItem(0, ANSWER[0])
        assert stream.offer(item) is Outcome.ACCEPTED          # counts a change on the stream, which rings the lot
        assert stream.offer(TokenItem(1, ANSWER[1])) is Outcome.ACCEPTED   # rings again before the loop turns
        _turns(loop)
        assert woken == [(p, item)], "woken once, with what it was waiting for"
        assert (p.since, p.effect, p.until) == (-1, None, -1)
    finally:
        loop.close()


def test_a_parked_put_waits_for_the_reader_and_its_pause_is_counted() -> None:
    loop, clock = asyncio.new_event_loop(), RealClock()
    try:
        woken: list[object] = []
        lot = ParkingLot(loop, clock.now, lambda p, value: woken.append(value))
        stream = _stream(capacity=1)
        channel = stream.new_channel()
        stream.connect(-1, channel)
        assert stream.offer(TokenItem(0, ANSWER[0])) is Outcome.ACCEPTED
        put = Put(stream, TokenItem(1, ANSWER[1]))
        assert stream.offer(put.item) is Outcome.FULL
        p = _idle_proc(loop)
        lot.park(p, put, clock.now())
        _turns(loop)
        assert woken == []
        assert stream.take(channel) == TokenItem(0, ANSWER[0])     # the reader makes room and rings
        _turns(loop)
        assert woken == [Outcome.ACCEPTED]
        stats = channel.stats()
        assert stats.pauses == 1 and stats.waited_ns > 0 and len(channel) == 1
    finally:
        loop.close()


def test_a_stream_whose_changes_are_not_counted_cannot_park() -> None:
    import threading

    loop = asyncio.new_event_loop()
    try:
        lot = ParkingLot(loop, RealClock().now, lambda p, value: None)
        stream = _stream()
        channel = stream.new_channel()
        stream.changes = threading.Condition()  # type: ignore[assignment]
        with pytest.raises(TypeError, match="needs a stream whose changes are counted by Changes"):
            lot.park(_idle_proc(loop), Get(stream, channel), 0)
    finally:
        loop.close()


# -- wires, loops, the private run ----------------------------------------------------------------
class _Frames:
    def send(self, frame: bytes, resume: Callable[[bool], None]) -> bool | None:
        return True


def test_wires_are_told_apart_by_the_loop_wire_protocol() -> None:
    frames, memory = _Frames(), MemoryReader()
    assert isinstance(frames, LoopWire) and not isinstance(memory, LoopWire)
    assert split(frames) == (frames, None)
    assert split(memory) == (None, memory)
    assert split(None) == (None, None)


def test_loop_name_refuses_an_unknown_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(LOOP_ENV, "trio")
    with pytest.raises(ValueError, match="TOKENWIRE_LOOP must be 'uvloop' or 'asyncio', got 'trio'"):
        loop_name()
    monkeypatch.setenv(LOOP_ENV, "asyncio")
    assert loop_name() == "asyncio"


def test_run_is_for_a_private_driver_and_raises_a_processs_error() -> None:
    async def on_a_running_loop() -> None:
        with pytest.raises(RuntimeError, match="run\\(\\) is for a driver made by LoopDriver.private\\(\\)"):
            LoopDriver().run()
    asyncio.run(on_a_running_loop())

    def fails() -> Process:
        yield Sleep(1000)
        raise KeyError("boom")

    driver = LoopDriver.private()
    assert driver.precise
    driver.spawn(fails())
    with pytest.raises(KeyError, match="boom"):
        driver.run()


def test_a_yield_that_is_no_effect_is_a_type_error_in_the_process() -> None:
    def confused() -> Process:
        try:
            yield 42  # type: ignore[misc]
        except TypeError as exc:
            return str(exc)
        return "no error"

    driver = LoopDriver.private()
    result = driver.spawn(confused())
    driver.run()
    assert result.result() == "a process yielded 42, not an effect"
    sim = Simulation()
    sim.spawn(confused())
    with pytest.raises(TypeError, match="a process yielded 42, not an effect"):
        sim.run()


# -- the same exchange under both drivers ---------------------------------------------------------
def _exchange(driver: Simulation | LoopDriver, policy: str) -> tuple[object, ...]:
    """Ten Puts while the reader sleeps, then the reader drains; what each side saw and the channel decided."""
    stream = _stream(policy)
    channel = stream.new_channel()
    stream.connect(-1, channel)
    outcomes: list[Outcome] = []
    taken: list[TokenItem | Taken] = []

    def producer() -> Process:
        for i in range(10):
            outcomes.append((yield Put(stream, TokenItem(i, ANSWER[i]))))
        channel.close()
        stream.wake()

    def reader() -> Process:
        yield Sleep(20_000_000)
        while True:
            got = yield Get(stream, channel)
            taken.append(got)
            if isinstance(got, Taken):
                return

    driver.spawn(producer())
    driver.spawn(reader())
    driver.run()
    s = channel.stats()
    decisions = [(e.index, e.decision, e.depth) for e in stream.trace]
    return outcomes, taken, (s.delivered, s.dropped, s.gap_runs, s.high_water, s.cuts), decisions, s.pauses


@pytest.mark.parametrize("policy", ["drop-newest", "drop-oldest", "disconnect"])
def test_a_put_and_a_get_decide_the_same_on_both_drivers(policy: str) -> None:
    virtual, real = _exchange(Simulation(), policy), _exchange(LoopDriver.private(), policy)
    assert virtual == real
    assert virtual[0] != [Outcome.ACCEPTED] * 10, "the channel was full: the policy decided"


def test_a_blocked_put_delivers_the_same_tokens_on_both_drivers() -> None:
    virtual, real = _exchange(Simulation(), "block"), _exchange(LoopDriver.private(), "block")
    assert virtual[0] == real[0] == [Outcome.ACCEPTED] * 10
    assert virtual[1] == real[1] == [TokenItem(i, ANSWER[i]) for i in range(10)] + [Taken.END]
    assert virtual[2] == real[2] == (10, 0, 0, 3, 0)
    assert virtual[4] >= 1 and real[4] >= 1, "the producer waited on both"


def test_one_pipeline_delivers_the_same_tokens_on_both_drivers() -> None:
    # The reader's 3 ms is more than a precise driver spins (SPIN_NS): a shorter wait holds the loop, the
    # producer cannot run meanwhile, and the channel never fills on the real clock.
    spec = {"tokens": 20, "policy": "block", "capacity": 3, "reader_ms": 3.0, "producer_ms": 0.2, "retry_ms": 5}
    virtual = run(RunSpec(**spec))
    real = run(RunSpec(**spec, clock="real"), LoopDriver.private())
    assert virtual.ids == real.ids == tuple(range(20))
    assert virtual.text == real.text
    assert (virtual.stats.delivered, virtual.stats.dropped, virtual.stats.high_water) == \
        (real.stats.delivered, real.stats.dropped, real.stats.high_water)
    assert virtual.stats.pauses > 0 and real.stats.pauses > 0


# -- the caught-up reader: a token written inside the producer's step ------------------------------
class _Recording:
    """A LoopWire that takes every frame at once and notes it in ``order``."""

    def __init__(self, order: list[str]) -> None:
        self.order = order

    def send(self, frame: bytes, resume: Callable[[bool], None]) -> bool | None:
        if b"event: token" in frame:
            self.order.append("sent " + frame.split(b"\n")[0].decode())
        return True


def _producer(stream: Stream, order: list[str], tokens: int) -> Process:
    """Offer ``tokens`` tokens, noting each Put's return, with a timer turn (``Sleep``) between them."""
    for index in range(tokens):
        yield Sleep(1_000_000)
        stream.log.append(stream.stream_id, index, f"t{index}")
        outcome = yield Put(stream, TokenItem(index, f"t{index}"))
        order.append(f"put id: {index} {outcome.value}")
    stream.ended(tokens)


def _caught_up_run(keep_trace: bool, follower: bool = False) -> tuple[list[str], Stream]:
    order: list[str] = []

    async def main() -> Stream:
        driver = LoopDriver()
        stream = Stream("c", Model(ANSWER[:3], TimingModel()), MemoryTokenLog(lambda: 0), keep_trace=keep_trace)
        channel = stream.new_channel()
        _, producer = stream.connect(-1, channel)
        assert producer is not None
        producer.close()                               # ours below offers instead, noting each Put's return
        done = [driver.spawn(stream.serve(-1, channel), _Recording(order))]
        if follower:
            done.append(driver.spawn(stream.serve(-1, stream.new_channel()), _Recording([])))
        await asyncio.sleep(0.01)                      # the writers reach their first Get and wait
        done.append(driver.spawn(_producer(stream, order, 3)))
        await asyncio.wait_for(asyncio.gather(*done), 5)
        return stream
    stream = asyncio.run(main())
    return order, stream


def test_a_caught_up_readers_token_is_written_before_the_producers_put_returns() -> None:
    """The writer waits on its empty channel: the producer's Put hands it the token, and the frame is written
    inside the producer's step (before the Put returns), with the channel's figures what offer and take say."""
    order, stream = _caught_up_run(keep_trace=False)
    assert order == [item for i in range(3) for item in (f"sent id: {i}", f"put id: {i} accepted")], order
    assert stream.channel is None or stream.channel.stats().delivered == 3


@pytest.mark.parametrize("follower", [False, True])
def test_a_kept_trace_or_a_follower_takes_the_offer_and_the_retry_still_in_the_same_turn(follower: bool) -> None:
    """A stream that keeps its trace (the report's, which records offer before take) or has a follower goes
    through offer and the parked writer's retry; the retry still runs when the producer's step ends."""
    order, stream = _caught_up_run(keep_trace=not follower, follower=follower)
    assert order == [item for i in range(3) for item in (f"put id: {i} accepted", f"sent id: {i}")], order
    if not follower:
        assert [(e.index, e.decision) for e in stream.trace][:2] == [(0, "accepted"), (0, "taken")]


# -- entries ready together go out in one write --------------------------------------------------
class _Writes:
    """A LoopWire that takes every write at once and keeps them."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def send(self, frame: bytes, resume: Callable[[bool], None]) -> bool | None:
        self.writes.append(frame)
        return True


def _replayed(batch: int, cursor: int, cut_after: int | None = None) -> tuple[list[bytes], int]:
    """Log the whole 40-token answer, then read it after ``cursor`` with ``batch``: the writes, entries sent."""
    async def main() -> tuple[list[bytes], int]:
        log = MemoryTokenLog(lambda: 0)
        stream = Stream("r", Model(ANSWER[:40], TimingModel()), log)
        for index, token in enumerate(ANSWER[:40]):
            log.append("r", index, token)
        stream.ended(40)
        channel, wire = stream.new_channel(), _Writes()
        await LoopDriver().spawn(stream.serve(cursor, channel, cut_after=cut_after, batch=batch), wire)
        return wire.writes, channel.sent
    return asyncio.run(main())


@pytest.mark.parametrize(("cursor", "cut_after"), [(-1, None), (6, None), (-1, 9), (3, 20)])
def test_a_replay_goes_out_in_writes_of_up_to_batch_entries_as_the_same_bytes(cursor: int,
                                                                              cut_after: int | None) -> None:
    """A resume's replay is written ``batch`` entries a write: the reader gets the same bytes, the connection
    counts the same entries, and a cut still falls after its count."""
    one, sent_one = _replayed(1, cursor, cut_after)
    many, sent_many = _replayed(16, cursor, cut_after)
    assert b"".join(many) == b"".join(one) and sent_many == sent_one
    tokens = [w.count(b"\nevent: token\n") for w in many]
    expected = min(39 - cursor, cut_after if cut_after is not None else 99)
    assert sum(tokens) == sent_one == expected
    done = 1 if cut_after is None else 0                  # the open write, the token writes, done unless cut
    assert max(tokens) == min(16, expected) and len(many) == 1 + -(-expected // 16) + done, tokens


# -- the driver writes a caught-up token for the waiting writer --------------------------------------
class _Slow:
    """A LoopWire that answers ``answers[i]`` to the i-th write (True when past them); a None answer's resume
    is kept in ``waiting`` for the test to call."""

    def __init__(self, answers: dict[int, bool | None]) -> None:
        self.answers, self.writes = answers, []            # type: list[bytes]
        self.waiting: list[Callable[[bool], None]] = []

    def send(self, frame: bytes, resume: Callable[[bool], None]) -> bool | None:
        answer = self.answers.get(len(self.writes), True)
        self.writes.append(frame)
        if answer is None:
            self.waiting.append(resume)
        return answer


def _paced(wire: _Slow, tokens: int, step_ns: int, heartbeat_ns: int | None = None,
           drain_after: int | None = None) -> tuple[object, list[int], Stream]:
    """One reader of a canned stream of ``tokens`` at ``step_ns`` on ``wire``; a write left waiting is drained
    ``drain_after`` tokens later.  Returns the ending, the token ids written in order, and the stream."""
    async def main() -> tuple[object, Stream]:
        driver = LoopDriver()
        stream = Stream("w", Model(ANSWER[:tokens], TimingModel(step_ns=step_ns, ttft_ns=step_ns, jitter=0)),
                        MemoryTokenLog(lambda: 0), keep_trace=False)
        done = driver.spawn(stream.serve(-1, stream.new_channel(), heartbeat_ns=heartbeat_ns), wire)
        if drain_after is not None:
            while not wire.waiting:
                await asyncio.sleep(0.001)
            while stream.log.length("w") < min(tokens, len([w for w in wire.writes if b"event: token" in w])
                                                 + drain_after):
                await asyncio.sleep(0.001)
            wire.waiting.pop()(True)
        return await asyncio.wait_for(done, 10), stream
    ending, stream = asyncio.run(main())
    lines = [line for w in wire.writes for line in w.split(b"\n")]
    ids = [int(lines[i - 1][4:]) for i, line in enumerate(lines) if line == b"event: token"]
    return ending, ids, stream


def test_a_write_the_wire_takes_later_holds_the_writer_and_the_rest_follow_in_order() -> None:
    """The driver writes token 3 for the waiting writer and the wire takes it only later: meanwhile the
    following tokens wait in the channel (block), and once it drained the writer sends them, each once."""
    wire = _Slow({4: None})                       # write 0 is the open frame: 4 is token 3
    ending, ids, stream = _paced(wire, 12, 2_000_000, drain_after=3)
    assert ending.value == "done" and ids == list(range(12)), ids
    assert stream.channel is None or stream.channel.stats().delivered == 12


def test_a_write_that_finds_the_peer_gone_ends_the_connection_as_gone() -> None:
    wire = _Slow({3: False})
    ending, ids, _ = _paced(wire, 12, 2_000_000)
    assert ending.value == "peer-gone" and ids == [0, 1, 2], (ending, ids)


def test_tokens_written_for_the_waiting_writer_keep_its_heartbeat_quiet() -> None:
    """Tokens every 5 ms with a 30 ms heartbeat: the stream is never silent for a period, so no ping goes out,
    though the writer waits in one Get all along."""
    wire = _Slow({})
    ending, ids, _ = _paced(wire, 30, 5_000_000, heartbeat_ns=30_000_000)
    assert ending.value == "done" and ids == list(range(30))
    assert not any(w.startswith(b":") for w in wire.writes)
