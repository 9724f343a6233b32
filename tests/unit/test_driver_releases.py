"""What the event-loop driver lets go of when a process ends: its heartbeat timer and its wire.

A writer's heartbeat is a timed ``Get`` whose loop timer holds the process; a
process that ended while that timer was pending was kept alive by it, with its
wire and the connection behind the wire (and the request's body), until the
timer fired a heartbeat period later.  These tests hold the process's wire by a
weak reference only, with the garbage collector off, so only plain reference
counts can free it.
"""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Callable, Iterator

import pytest

from tokenwire.core.effects import Get, Process, Send
from tokenwire.core.frames import TokenItem
from tokenwire.core.model import ANSWER, Model, TimingModel
from tokenwire.core.stream import Stream
from tokenwire.core.tokenlog import MemoryTokenLog
from tokenwire.realtime import LoopDriver

HEARTBEAT_NS = 60_000_000_000       # a minute: far past the test, so only cancelling can drop its timer


class _Wire:
    """A loop wire that takes every frame at once; weakly referenceable (no slots)."""

    def send(self, frame: bytes, resume: Callable[[bool], None]) -> bool | None:
        return True


@pytest.fixture
def no_gc() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _stream() -> Stream:
    return Stream("s", Model(ANSWER[:3], TimingModel()), MemoryTokenLog(lambda: 0), policy="block", capacity=3)


def test_a_writer_that_ends_after_a_timed_get_is_released_at_once(no_gc: None) -> None:
    stream = _stream()
    channel = stream.new_channel()
    stream.connect(-1, channel)

    def writer() -> Process:
        got = yield Get(stream, channel, timeout_ns=HEARTBEAT_NS)   # parks: the channel is empty
        yield Send(f"{got!r}".encode())

    def producer() -> Process:
        yield Get(stream, channel, timeout_ns=0)                    # one step later than the writer parks
        stream.offer(TokenItem(0, ANSWER[0]))

    driver = LoopDriver.private()
    wire = _Wire()
    held = weakref.ref(wire)
    done = driver.spawn(writer(), wire)
    driver.spawn(producer())
    del wire
    driver.run()
    assert done.done() and done.exception() is None
    assert held() is None, "the ended writer's heartbeat timer still holds it and its wire"
    pending = [h for h in driver.loop._scheduled if not h.cancelled()]   # type: ignore[attr-defined]
    assert pending == [], f"timers left behind by ended processes: {pending!r}"


def test_a_process_ended_by_close_while_parked_is_taken_off_the_lot(no_gc: None) -> None:
    stream = _stream()
    channel = stream.new_channel()
    stream.connect(-1, channel)
    loop = asyncio.new_event_loop()
    try:
        driver = LoopDriver(loop)

        def writer() -> Process:
            yield Get(stream, channel, timeout_ns=HEARTBEAT_NS)

        wire = _Wire()
        held = weakref.ref(wire)
        driver.spawn(writer(), wire)
        del wire
        loop.run_until_complete(asyncio.sleep(0))     # the writer runs, and parks on the empty channel
        assert held() is not None, "parked: the driver still holds it"
        driver.close()
        assert held() is None, "closed, but the parking lot or its timer still holds the writer"
        stream.offer(TokenItem(0, ANSWER[0]))          # rings a lot with nobody parked: nothing to retry
        loop.run_until_complete(asyncio.sleep(0))
    finally:
        loop.close()
