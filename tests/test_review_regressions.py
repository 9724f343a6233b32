"""Three bugs a review found in the event-loop rewrite, each pinned by the smallest run that showed it."""

from __future__ import annotations

import asyncio

from tokenwire.asgi.shared_model import SharedModelStream
from tokenwire.core.clock import RealClock, VirtualClock
from tokenwire.core.effects import Await, Process, Sleep
from tokenwire.core.model import ANSWER, Model, TimingModel
from tokenwire.core.reader import MemoryReader
from tokenwire.core.simulate import Simulation
from tokenwire.core.stream import Ending, Stream
from tokenwire.core.tokenlog import LogUnavailable, MemoryTokenLog
from tokenwire.realtime import LoopDriver


def test_a_reader_that_arrives_once_all_is_logged_does_not_cut_off_one_still_draining() -> None:
    clock = VirtualClock()
    stream = Stream("s", Model(ANSWER[:10], TimingModel(step_ns=100_000, ttft_ns=100_000, jitter=0.0)),
                    MemoryTokenLog(clock.now), capacity=4)
    slow, late = MemoryReader(reader_ns=5_000_000), MemoryReader()
    endings: dict[str, Ending] = {}

    def read(name: str, reader: MemoryReader, after_ns: int) -> Process:
        yield Sleep(after_ns)
        reader.begin_connection()
        endings[name] = yield from stream.serve(-1, stream.new_channel())

    sim = Simulation(clock)
    sim.spawn(read("slow", slow, 0), slow)
    sim.spawn(read("late", late, 30_000_000), late)        # all ten are logged by then; slow has read ~6
    sim.run()
    assert endings == {"slow": Ending.DONE, "late": Ending.DONE}
    assert slow.ids == late.ids == list(range(10))


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
        stream = SharedModelStream("m", model(), _DownLog())  # type: ignore[arg-type]
        wire = _Frames()
        writer = driver.spawn(stream.serve(-1, stream.new_channel(), heartbeat_ns=50_000_000), wire)
        for _ in range(100):
            if writer.done():
                break
            await asyncio.sleep(0.01)
        return writer.done(), stream.producer_running, wire.frames

    done, running, frames = asyncio.run(scenario())
    assert done and not running
    assert b"event: done" not in b"".join(frames) and b": ping" not in b"".join(frames)
