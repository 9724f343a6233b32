"""A canned producer's tokens as a ``Run``: taken by the event-loop driver, stepped by the process on the virtual
clock, and the same tokens, waits, cancellation and log errors either way."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from tokenwire.core.effects import Process
from tokenwire.core.model import ANSWER, Model, TimingModel
from tokenwire.core.simulate import Simulation
from tokenwire.core.stream import Stream
from tokenwire.core.tokenlog import MemoryTokenLog, StreamState, UnknownStream
from tokenwire.realtime import LoopDriver

STEP_NS = 1_000_000


class _Taking:
    """A LoopWire that takes every frame at once and keeps it."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def send(self, frame: bytes, resume: Callable[[bool], None]) -> bool | None:
        self.writes.append(frame)
        return True


def _recorded(gen: Process, seen: list[str]) -> Process:
    """``gen``, with the name of every effect it yields noted in ``seen`` (what a driver was asked to do)."""
    value: object = None
    while True:
        try:
            effect = gen.send(value)
        except StopIteration as stop:
            return stop.value
        seen.append(type(effect).__name__)
        value = yield effect


def _stream(tokens: int, now: Callable[[], int] = lambda: 0, **kwargs: object) -> Stream:
    model = Model(ANSWER[:tokens], TimingModel(step_ns=STEP_NS, ttft_ns=STEP_NS, jitter=0))
    return Stream("r", model, MemoryTokenLog(now), keep_trace=False, **kwargs)  # type: ignore[arg-type]


def _ids(writes: list[bytes]) -> list[int]:
    return [int(w.split(b"\n")[0][4:]) for w in writes if b"\nevent: token\n" in w]


def test_the_loop_takes_a_canned_answer_as_one_run_and_the_simulation_has_the_process_step_it() -> None:
    """On the loop the producer yields one ``Run`` for the whole answer; on the virtual clock the same producer,
    told the driver made none, yields a ``Sleep`` and a ``Put`` per token; the log holds the same answer."""
    on_loop: list[str] = []

    async def loop_run() -> Stream:
        stream = _stream(8)
        driver = LoopDriver()
        await asyncio.wait_for(driver.spawn(_recorded(stream.source.produce(stream, 0), on_loop)), 5)
        return stream

    looped = asyncio.run(loop_run())
    virtual, simulated = _stream(8), []          # type: Stream, list[str]
    sim = Simulation()
    sim.spawn(_recorded(virtual.source.produce(virtual, 0), simulated))
    sim.run()
    assert on_loop == ["Run"]
    assert simulated == ["Run"] + ["Sleep", "Put"] * 8, simulated
    assert looped.log.read_after("r", -1) == virtual.log.read_after("r", -1) == list(ANSWER[:8])
    assert looped.log.state("r") is virtual.log.state("r") is StreamState.DONE


def test_a_run_to_a_caught_up_reader_writes_every_token_once_in_order_and_ends_with_done() -> None:
    wire = _Taking()

    async def main() -> object:
        stream = _stream(40)
        return await asyncio.wait_for(LoopDriver().spawn(stream.serve(-1, stream.new_channel()), wire), 5)

    ending = asyncio.run(main())
    assert getattr(ending, "value", None) == "done"
    assert _ids(wire.writes) == list(range(40))
    assert wire.writes[-1].startswith(b"id: 39\nevent: done\n")


def test_a_run_cancelled_between_tokens_stops_before_the_next_and_the_process_ends_it() -> None:
    """A reader that leaves with ``cancel`` once token 4 was written: the run makes at most the token whose step
    was under way when the cancel came (one for nobody), and the process marks the log cancelled."""
    wire = _Taking()

    async def main() -> tuple[Stream, int]:
        stream = _stream(60, on_disconnect="cancel")
        channel = stream.new_channel()
        driver = LoopDriver()
        driver.spawn(stream.serve(-1, channel), wire)
        while len(_ids(wire.writes)) < 5:
            await asyncio.sleep(0.001)
        at = stream.log.length("r")
        stream.disconnect(channel)                       # the last reader left: the producer is cancelled
        while stream.producer_running:
            await asyncio.sleep(0.001)
        driver.close()
        return stream, at

    stream, at = asyncio.run(main())
    logged = stream.log.length("r")
    assert at <= logged <= at + 1 < 60, (at, logged)
    assert stream.log.state("r") is StreamState.CANCELLED


def test_a_log_error_in_a_run_is_raised_inside_the_process_which_abandons_its_readers() -> None:
    """The log evicts the stream mid-answer (its age passed): the run's next append raises ``UnknownStream``
    inside the producer, which ends the reader's connection without ``done`` and reports the error."""
    wire, errors, clock = _Taking(), [], [0]     # type: _Taking, list[BaseException], list[int]

    async def main() -> object:
        stream = _stream(60, now=lambda: clock[0])
        stream.log.max_age_ns = 10**12
        driver = LoopDriver(on_error=errors.append)
        writer = driver.spawn(stream.serve(-1, stream.new_channel()), wire)
        while len(_ids(wire.writes)) < 3:
            await asyncio.sleep(0.001)
        clock[0] = 2 * 10**12                         # every entry is past its age now
        return await asyncio.wait_for(writer, 5)

    ending = asyncio.run(main())
    assert getattr(ending, "value", None) != "done"
    assert not any(b"event: done" in w for w in wire.writes)
    assert 3 <= len(_ids(wire.writes)) < 60
    assert [type(e) for e in errors] == [UnknownStream], errors


def test_closing_the_driver_with_a_runs_token_due_ends_it_quietly() -> None:
    errors: list[BaseException] = []

    async def main() -> asyncio.Future[object]:
        stream = _stream(60)
        driver = LoopDriver(on_error=errors.append)
        producer = driver.spawn(stream.source.produce(stream, 0))
        while stream.log.length("r") < 2:
            await asyncio.sleep(0.001)
        driver.close()
        for _ in range(30):                          # the run's next timer comes and finds it ended
            await asyncio.sleep(0.001)
        return producer

    producer = asyncio.run(main())
    assert producer.cancelled() and not errors


class _Failing(Model):
    """The canned answer, whose step at ``at`` raises (a bug under the producer)."""

    def __init__(self, tokens: int, at: int) -> None:
        super().__init__(ANSWER[:tokens], TimingModel(step_ns=STEP_NS, ttft_ns=STEP_NS, jitter=0))
        self.at = at

    def generate(self, index: int) -> str:
        if index == self.at:
            raise ZeroDivisionError("a bug with a secret in its text")
        return super().generate(index)


def _failing_stream(tokens: int, at: int) -> Stream:
    return Stream("r", _Failing(tokens, at), MemoryTokenLog(lambda: 0), keep_trace=False)


def test_a_bug_under_a_run_ends_its_reader_with_failed_after_what_the_log_holds_and_is_reported() -> None:
    """Not left waiting on heartbeats: the reader gets tokens 0-4, then ``failed`` naming the error's type (not
    its text), and the driver's error handler gets the error itself."""
    wire, errors = _Taking(), []      # type: _Taking, list[BaseException]

    async def main() -> object:
        stream = _failing_stream(40, at=5)
        driver = LoopDriver(on_error=errors.append)
        return await asyncio.wait_for(driver.spawn(stream.serve(-1, stream.new_channel()), wire), 5)

    ending = asyncio.run(main())
    assert getattr(ending, "value", None) == "done"          # the connection reached its closing frame
    assert _ids(wire.writes) == list(range(5))
    last = wire.writes[-1]
    assert last.startswith(b"id: 4\nevent: failed\n"), last
    assert b'"the model raised ZeroDivisionError"' in last and b"secret" not in last
    assert [type(e) for e in errors] == [ZeroDivisionError], errors


def test_the_same_bug_on_the_virtual_clock_ends_the_stream_as_failed() -> None:
    from tokenwire.core.reader import MemoryReader

    stream, reader = _failing_stream(40, at=5), MemoryReader()
    sim = Simulation()
    sim.spawn(stream.serve(-1, stream.new_channel()), reader)
    with pytest.raises(ZeroDivisionError):
        sim.run()                                             # a simulation stops at the first error
    assert reader.ids == list(range(5))
    assert stream.ending is not None and stream.ending.error == "the model raised ZeroDivisionError"
    assert stream.log.state("r") is StreamState.CANCELLED


def test_a_bug_after_the_stream_ended_under_the_producer_leaves_that_ending() -> None:
    """The log lost the stream (a reader found out, ``lose``), then the producer's step raised: the readers still
    get "lost", not "failed"."""
    from tokenwire.core.endings import LOST
    from tokenwire.core.sources import _failed

    stream = _failing_stream(40, at=5)
    stream.lose(3)
    _failed(stream, ZeroDivisionError("late"))
    assert stream.ending == LOST and stream.total == 3
