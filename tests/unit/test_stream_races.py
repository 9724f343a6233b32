"""A stream under races: one producer per stream id, a failed log call leaves no half-made state, and a reader
that arrives once all is logged replays beside one still draining (the heartbeat timeout that other wake-ups
do not restart is the event-loop driver's: test_realtime.py)."""

import json

import pytest

from tokenwire.core.clock import VirtualClock
from tokenwire.core.effects import Process, Sleep
from tokenwire.core.endings import LOST, EarlyEnd
from tokenwire.core.frames import TokenItem
from tokenwire.core.model import ANSWER, Model, TimingModel
from tokenwire.core.pipeline import RunSpec
from tokenwire.core.reader import MemoryReader
from tokenwire.core.simulate import Simulation
from tokenwire.core.sources import Fed, Source
from tokenwire.core.stream import Ending, Stream
from tokenwire.core.tokenlog import LogUnavailable, MemoryTokenLog, StreamState
from tokenwire.endpoints.registry import Registry


def test_registry_never_forgets_a_stream_in_use():
    # The log keeps more than the registry (as when a running stream keeps writing to it).
    reg = Registry(MemoryTokenLog(lambda: 0, max_streams=100), max_streams=2)
    busy = reg.create(RunSpec(tokens=10))
    busy.stream.connect(-1, busy.stream.new_channel())   # a reader and a producer: in use
    idle = reg.create(RunSpec(tokens=10))
    reg.create(RunSpec(tokens=10))
    reg.create(RunSpec(tokens=10))
    assert reg.get(busy.stream_id) is busy, "the same Stream object, so no second producer can start"
    assert len(reg) <= 3
    assert reg.get(idle.stream_id) is not idle             # the idle one was forgotten instead: joined afresh


class FlakyLog(MemoryTokenLog):
    """Fails the next set_state(GENERATING) once, as a Redis blip would."""

    fail_next = True

    def set_state(self, stream_id, state):
        if state is StreamState.GENERATING and self.fail_next:
            self.fail_next = False
            raise LogUnavailable("token log unavailable: blip")
        super().set_state(stream_id, state)


def test_a_failed_connect_leaves_the_stream_as_it_was():
    log = FlakyLog(lambda: 0)
    stream = Stream("s", Model(ANSWER[:5], TimingModel()), log)
    first = stream.new_channel()
    with pytest.raises(LogUnavailable):
        stream.connect(-1, first)
    assert not stream.producer_running and stream.channel is None
    replay, producer = stream.connect(-1, stream.new_channel())
    assert replay == [] and producer is not None and stream.producer_running


def test_an_empty_last_event_id_header_does_not_override_the_query():
    from tokenwire.endpoints.params import resume_cursor
    assert resume_cursor("", "5", 10, 10) == 5
    assert resume_cursor("3", "5", 10, 10) == 3
    assert resume_cursor("", None, 10, 10) == -1


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


class _LostAfter(Source):
    """A source whose log loses the stream after ``n`` tokens, ended with an ending made here (equal to LOST)."""

    length = 10

    def __init__(self, n: int) -> None:
        self.n = n

    def produce(self, stream: Fed, start: int) -> Process:
        for index in range(start, self.n):
            yield Sleep(1_000_000)
            stream.log.append(stream.stream_id, index, ANSWER[index])
            yield stream.pass_on(TokenItem(index, ANSWER[index]))
        stream.ended(self.n, EarlyEnd("lost"))      # not the LOST constant: an ending is a value


class _CountingLog(MemoryTokenLog):
    reads = 0

    def read_after(self, stream_id, cursor, limit=None):
        self.reads += 1
        return super().read_after(stream_id, cursor, limit)


def test_a_followers_lost_ending_is_the_lost_ending_wherever_it_was_made() -> None:
    """The follower reads nothing more from a log that lost the stream, and ends ``lost`` after what it holds."""
    clock = VirtualClock()
    log = _CountingLog(clock.now)
    stream = Stream("s", _LostAfter(4), log)
    first, follower = MemoryReader(), MemoryReader()
    endings: dict[str, Ending] = {}
    reads_at_end: list[int] = []

    def read(name: str, reader: MemoryReader, after_ns: int) -> Process:
        yield Sleep(after_ns)
        reader.begin_connection()
        endings[name] = yield from stream.serve(-1, stream.new_channel())
        reads_at_end.append(log.reads)

    sim = Simulation(clock)
    sim.spawn(read("first", first, 0), first)
    sim.spawn(read("follower", follower, 1_500_000), follower)     # joins after token 0: follows the log
    sim.run()
    assert stream.ending == LOST and endings == {"first": Ending.DONE, "follower": Ending.DONE}
    # Token 3 was rung to the follower as the log lost the stream: it is not read from a lost log.
    assert first.ids == [0, 1, 2, 3] and follower.ids == [0, 1, 2]
    assert [json.loads(reader.events[-1].data) for reader in (first, follower)] == [
        {"tokens": 4, "delivered_from": 0, "dropped": 0, "stopped_early": True, "reason": "lost"}] * 2
    assert reads_at_end[-1] == reads_at_end[0]           # once the stream was lost, no reader read the log again


def test_a_stream_being_adopted_is_never_the_one_forgotten_to_make_room() -> None:
    """Every stream the registry knows is in use: the one just made stays (its model unread, not closed)."""
    from tokenwire.asgi.model_stream import ModelTokens

    async def model():
        yield "a"

    reg = Registry(MemoryTokenLog(lambda: 0, max_streams=100), max_streams=1)
    busy = reg.create(RunSpec(tokens=10))
    busy.stream.connect(-1, busy.stream.new_channel())   # a reader and a producer: in use
    tokens = ModelTokens(model())
    made = reg.adopt(Stream("m", tokens, reg.log, keep_trace=False))
    assert reg.get("m") is made and reg.get(busy.stream_id) is busy
    assert tokens.run.iterator is not None and not tokens.run.released
