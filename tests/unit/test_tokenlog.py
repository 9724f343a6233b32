"""The memory token log (``tokenwire.core.tokenlog``): an exclusive cursor and appends in order, each index once, a
cursor trimmed away is a gap and never a silent skip, the count and age bounds, and its states."""

import pytest

from tokenwire.core.tokenlog import IndexConflict, LogGap, MemoryTokenLog, StreamState, UnknownStream


class FakeNow:
    def __init__(self):
        self.t = 0

    def __call__(self):
        return self.t


def test_exclusive_cursor_and_appends_in_order():
    log = MemoryTokenLog(FakeNow())
    log.create("s", {"seed": 1}, total=5)
    for i, tok in enumerate("abcd"):
        log.append("s", i, tok)
    assert log.length("s") == 4
    assert log.read_after("s", -1) == list("abcd")
    assert log.read_after("s", 1) == ["c", "d"]          # Last-Event-ID 1 -> from 2
    assert log.read_after("s", 3) == []
    assert log.read_after("s", 0, limit=2) == ["b", "c"]
    assert log.meta("s") == {"seed": 1} and log.total("s") == 5


def test_an_index_is_never_appended_twice_or_skipped():
    # Not the shared contract of test_redislog.py: this log refuses even the same token again, where the Redis
    # log takes an identical retry from the same owner (its reply may have been lost).
    log = MemoryTokenLog(FakeNow())
    log.create("s", {}, total=3)
    log.append("s", 0, "a")
    with pytest.raises(IndexConflict, match="cannot append index 0, the next index is 1"):
        log.append("s", 0, "a")
    with pytest.raises(IndexConflict, match="cannot append index 2, the next index is 1"):
        log.append("s", 2, "c")
    log.append("s", 1, "b")
    log.append("s", 2, "c")
    with pytest.raises(IndexConflict):
        log.append("s", 3, "past the end")


def test_trimmed_cursor_is_a_gap_not_a_silent_skip():
    log = MemoryTokenLog(FakeNow(), max_tokens=3)
    log.create("s", {}, total=10)
    for i in range(6):
        log.append("s", i, str(i))
    assert log.trimmed == 3
    assert log.read_after("s", 2) == ["3", "4", "5"]
    with pytest.raises(LogGap) as err:
        log.read_after("s", 1)
    assert str(err.value) == "stream 's' no longer holds the tokens after cursor 1: the log keeps indices from 3 on"


def test_bounded_streams_evict_least_recently_written():
    log = MemoryTokenLog(FakeNow(), max_streams=2)
    for sid in "abc":
        log.create(sid, {}, total=1)
    assert "a" not in log and len(log) == 2 and log.evictions == 1
    with pytest.raises(UnknownStream, match=r"unknown stream 'a' \(never created, or evicted from the token log\)"):
        log.length("a")


def test_age_bound():
    now = FakeNow()
    log = MemoryTokenLog(now, max_age_ns=100)
    log.create("old", {}, total=1)
    now.t = 150
    log.create("new", {}, total=1)
    assert "old" not in log and "new" in log and log.evictions == 1


def test_state_and_validation():
    log = MemoryTokenLog(FakeNow())
    log.create("s", {}, total=1)
    assert log.state("s") is StreamState.GENERATING
    log.set_state("s", StreamState.DONE)
    assert log.state("s") is StreamState.DONE
    with pytest.raises(ValueError, match="stream 's' already exists"):
        log.create("s", {}, total=1)
    with pytest.raises(ValueError, match="cursor must be -1 or a token index, got -2"):
        log.read_after("s", -2)
    with pytest.raises(ValueError, match="max_streams must be a positive int, got 0"):
        MemoryTokenLog(FakeNow(), max_streams=0)
