"""The bounded channel between producer and reader (``tokenwire.core.channel``): each policy's answer when it is full
(block, drop-newest, drop-oldest, disconnect), its counts and pauses, and the refusals of a bad capacity or policy."""

import pytest

from tokenwire.core.channel import MAX_CAPACITY, BoundedChannel, Outcome, Policy, Taken, parse_policy
from tokenwire.core.effects import TokenItem


def items(n, start=0):
    return [TokenItem(i, f"t{i}") for i in range(start, start + n)]


@pytest.mark.parametrize("capacity", [0, -1, MAX_CAPACITY + 1, 1.5, True, "4"])
def test_bad_capacity(capacity):
    with pytest.raises(ValueError, match=r"capacity must be an int from 1 to 65536, got "):
        BoundedChannel(capacity, "block")


def test_unknown_policy_lists_valid_ones():
    with pytest.raises(ValueError) as err:
        BoundedChannel(4, "drop")
    assert str(err.value) == "policy must be one of block, drop-newest, drop-oldest, disconnect, got 'drop'"
    assert parse_policy("drop-oldest") is Policy.DROP_OLDEST


def test_block_answers_full_and_keeps_everything():
    ch = BoundedChannel(2, "block")
    a, b, c = items(3)
    assert [ch.offer(a), ch.offer(b), ch.offer(c)] == [Outcome.ACCEPTED, Outcome.ACCEPTED, Outcome.FULL]
    assert ch.take() == a
    assert ch.offer(c) is Outcome.ACCEPTED
    ch.close()
    assert [ch.take(), ch.take(), ch.take()] == [b, c, Taken.END]
    s = ch.stats()
    assert (s.delivered, s.dropped, s.high_water) == (3, 0, 2)


def test_drop_newest_discards_incoming_and_counts_gap_runs():
    ch = BoundedChannel(2, "drop-newest")
    outcomes = [ch.offer(t) for t in items(5)]
    assert outcomes == [Outcome.ACCEPTED] * 2 + [Outcome.DROPPED] * 3
    assert ch.take().index == 0
    ch.offer(TokenItem(5, "x"))          # accepted: space again
    ch.offer(TokenItem(6, "y"))          # dropped: a new run (5 was kept)
    s = ch.stats()
    assert (s.dropped, s.gap_runs, s.high_water) == (4, 2, 2)


def test_drop_oldest_evicts_head():
    ch = BoundedChannel(2, "drop-oldest")
    outcomes = [ch.offer(t) for t in items(4)]
    assert outcomes == [Outcome.ACCEPTED, Outcome.ACCEPTED, Outcome.EVICTED, Outcome.EVICTED]
    assert [ch.take().index, ch.take().index] == [2, 3]
    s = ch.stats()
    assert (s.dropped, s.gap_runs) == (2, 1)


def test_disconnect_cuts_reader_and_refuses_later_offers():
    ch = BoundedChannel(1, "disconnect")
    a, b, c = items(3)
    assert ch.offer(a) is Outcome.ACCEPTED
    assert ch.offer(b) is Outcome.CUT
    assert ch.offer(c) is Outcome.CLOSED
    assert ch.take() is Taken.CUT
    assert ch.stats().cuts == 1


def test_abandon_and_empty():
    ch = BoundedChannel(3)
    assert ch.take() is Taken.EMPTY
    ch.offer(items(1)[0])
    ch.abandon()
    assert ch.take() is Taken.GONE
    assert ch.offer(items(1)[0]) is Outcome.CLOSED


def test_record_pause():
    ch = BoundedChannel(1)
    ch.record_pause(5)
    ch.record_pause(7)
    assert (ch.stats().pauses, ch.stats().waited_ns) == (2, 12)
    with pytest.raises(ValueError, match="waited_ns must be non-negative, got -1"):
        ch.record_pause(-1)


def test_stats_are_frozen():
    s = BoundedChannel(1).stats()
    with pytest.raises(AttributeError):
        s.delivered = 3
