"""A shared log's tokens as a ``RunLogged``, taken by the event-loop driver's lanes, with the log played by hand:
each token is offered only once its ``done`` is called, in order; an error is raised inside the producer at the
index that failed; a producer ended meanwhile is never advanced; a full ``block`` channel holds the next token
back until the reader takes; a failing hand-over is the producer's error, not a call that never comes."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from tokenwire.core.channel import BoundedChannel
from tokenwire.core.effects import Get, Process, RunLogged
from tokenwire.core.frames import TokenItem
from tokenwire.core.model import ANSWER, Model, TimingModel
from tokenwire.core.stream import Stream
from tokenwire.core.tokenlog import MemoryTokenLog
from tokenwire.realtime import LoopDriver

STEP_NS = 1_000_000
N = 6


class HandSteps:
    """``LaterSteps`` whose log is the test: ``start`` keeps the driver's ``done`` in ``pending``."""

    def __init__(self, fail_landing_at: int = -1) -> None:
        self.started: list[int] = []
        self.pending: list[Callable[[BaseException | None], None]] = []
        self.landings: list[int] = []
        self.cancel = False
        self.fail_landing_at = fail_landing_at
        self._item = TokenItem(-1, "")

    @property
    def cancelled(self) -> bool:
        return self.cancel

    def cost(self, index: int) -> int:
        return STEP_NS

    def start(self, index: int, done: Callable[[BaseException | None], None]) -> None:
        self.started.append(index)
        self._item = TokenItem(index, f" t{index}")
        self.pending.append(done)

    def landed(self) -> TokenItem:
        if self._item.index == self.fail_landing_at:
            raise RuntimeError(f"the stream's bookkeeping failed at {self._item.index}")
        self.landings.append(self._item.index)
        return self._item

    def answer(self, error: BaseException | None = None) -> None:
        self.pending.pop(0)(error)


def _stream(capacity: int = 4) -> tuple[Stream, BoundedChannel[TokenItem]]:
    model = Model(ANSWER[:N], TimingModel(step_ns=STEP_NS, ttft_ns=STEP_NS, jitter=0))
    stream = Stream("r", model, MemoryTokenLog(lambda: 0), keep_trace=False, capacity=capacity)
    channel = stream.channel = stream.new_channel()
    return stream, channel


def _producer(stream: Stream, steps: HandSteps) -> Process:
    run = RunLogged(stream, steps, 0, N)
    try:
        reached = yield run
    except Exception as exc:  # noqa: BLE001 - what the test reads back
        return ("raised", str(exc), run.index)
    return ("ran", reached)


def _reader(stream: Stream, channel: BoundedChannel[TokenItem], got: list[int]) -> Process:
    while len(got) < N:
        item = yield Get(stream, channel)
        if not isinstance(item, TokenItem):
            return item
        got.append(item.index)
    return None


async def _until(condition: Callable[[], bool]) -> None:
    for _ in range(2000):
        if condition():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("the condition never held")


def _run(scene: Callable[[], Any]) -> Any:
    return asyncio.run(asyncio.wait_for(scene(), 10))


def test_each_token_is_offered_only_once_its_append_is_told_and_in_order() -> None:
    async def scene() -> tuple[Any, list[int], list[int]]:
        stream, channel = _stream()
        steps, got = HandSteps(), []
        driver = LoopDriver()
        driver.spawn(_reader(stream, channel, got))
        made = driver.spawn(_producer(stream, steps))
        for index in range(N):
            await _until(lambda index=index: steps.started == list(range(index + 1)))
            await asyncio.sleep(0.003)                       # the next token is not started meanwhile either
            assert steps.started == list(range(index + 1)) and got == list(range(index))
            steps.answer()                                   # the round: logged; the token goes out at once
            assert got == list(range(index + 1))
        return await made, got, steps.landings
    ended, got, landings = _run(scene)
    assert ended == ("ran", N) and got == landings == list(range(N))


def test_an_append_s_error_is_raised_inside_the_producer_at_the_index_that_failed() -> None:
    async def scene() -> tuple[Any, list[int]]:
        stream, channel = _stream()
        steps, got = HandSteps(), []
        driver = LoopDriver()
        driver.spawn(_reader(stream, channel, got))
        made = driver.spawn(_producer(stream, steps))
        for index in range(2):
            await _until(lambda index=index: len(steps.pending) == 1 and steps.started[-1] == index)
            steps.answer()
        await _until(lambda: len(steps.pending) == 1)
        steps.answer(RuntimeError("lease lost"))
        return await made, got
    ended, got = _run(scene)
    assert ended == ("raised", "lease lost", 2) and got == [0, 1]


def test_a_producer_closed_with_an_append_in_flight_is_never_advanced() -> None:
    async def scene() -> tuple[list[int], bool]:
        stream, channel = _stream()
        steps, got = HandSteps(), []
        driver = LoopDriver()
        driver.spawn(_reader(stream, channel, got))
        made = driver.spawn(_producer(stream, steps))
        await _until(lambda: len(steps.pending) == 1)
        driver.close()                                       # the server stops meanwhile
        steps.answer()                                       # the round comes back after: nobody to tell
        await asyncio.sleep(0.005)
        return steps.landings, made.cancelled()
    landings, cancelled = _run(scene)
    assert landings == [] and cancelled


def test_a_full_block_channel_holds_the_next_token_back_until_the_reader_takes() -> None:
    async def scene() -> tuple[list[int], list[int], Any]:
        stream, channel = _stream(capacity=1)
        steps, got = HandSteps(), []
        driver = LoopDriver()
        made = driver.spawn(_producer(stream, steps))      # no reader yet: token 0 fills the channel
        await _until(lambda: len(steps.pending) == 1)
        steps.answer()
        await _until(lambda: len(steps.pending) == 1)        # token 1 started, then told: the channel is full
        steps.answer()
        await asyncio.sleep(0.005)
        held = list(steps.started)                           # parked: token 2 is not started
        driver.spawn(_reader(stream, channel, got))
        while len(got) < N:
            await _until(lambda: bool(steps.pending) or len(got) == N)
            if steps.pending:
                steps.answer()
        return held, got, await made
    held, got, ended = _run(scene)
    assert held == [0, 1] and got == list(range(N)) and ended == ("ran", N)


def test_a_failing_hand_over_is_the_producer_s_error_and_not_a_call_that_never_comes() -> None:
    async def scene() -> tuple[Any, list[int]]:
        stream, channel = _stream()
        steps, got = HandSteps(fail_landing_at=1), []
        driver = LoopDriver()
        driver.spawn(_reader(stream, channel, got))
        made = driver.spawn(_producer(stream, steps))
        for _ in range(2):
            await _until(lambda: len(steps.pending) == 1)
            steps.answer()
        return await made, got
    ended, got = _run(scene)
    assert ended == ("raised", "the stream's bookkeeping failed at 1", 1) and got == [0]
