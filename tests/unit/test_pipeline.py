"""Invariants of whole runs, on the virtual clock for many seeds and on real threads."""

import pytest

from tokenwire.core.model import ANSWER
from tokenwire.core.pipeline import RunSpec, run
from tokenwire.core.stream import Ending
from tokenwire.realtime import LoopDriver

POLICIES = ["block", "drop-newest", "drop-oldest", "disconnect"]
SEEDS = range(1, 9)


def assert_complete(result, n):
    assert result.ids == tuple(range(n)), "contiguous 0..n-1 with no duplicate"
    assert result.text == "".join(ANSWER[:n])
    assert result.steps == {i: 1 for i in range(n)}, "each index generated exactly once"


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("seed", SEEDS)
def test_policy_invariants_virtual(policy, seed):
    n, capacity = 40, 3
    r = run(RunSpec(tokens=n, policy=policy, capacity=capacity, reader_ms=2.0, producer_ms=0.4, seed=seed))
    s = r.stats
    assert s.high_water <= capacity
    assert r.generated_total == n and max(r.steps.values()) == 1
    assert list(r.ids) == sorted(set(r.ids))
    if policy in ("block", "disconnect"):
        assert_complete(r, n)
        assert s.dropped == 0
    else:
        assert len(r.ids) + s.dropped == n
        assert s.dropped > 0 and s.gap_runs >= 1
    if policy == "block":
        assert s.pauses > 0 and s.waited_ns > 0 and len(r.connections) == 1
    if policy == "disconnect":
        assert s.cuts >= 1 and r.connections[0].ending is Ending.CUT


def test_same_spec_same_run_byte_for_byte():
    spec = RunSpec(policy="drop-oldest", reader_ms=3, seed=7)
    a, b = run(spec), run(spec)
    assert a.frames == b.frames and a.arrivals_ns == b.arrivals_ns and a.trace == b.trace


@pytest.mark.parametrize("on_disconnect", ["cancel", "detach"])
def test_resume_at_every_cut_point(on_disconnect):
    n, capacity = 30, 4
    for k in range(1, n):
        r = run(RunSpec(tokens=n, capacity=capacity, reader_ms=1.5, producer_ms=0.5,
                        hang_up_after=k, on_disconnect=on_disconnect))
        assert_complete(r, n)
        first, second = r.connections
        assert (first.tokens, first.last_event_id, first.ending) == (k, str(k - 1), Ending.PEER_GONE)
        assert second.start_index == k and second.tokens == n - k
        if on_disconnect == "cancel":
            assert first.generated_before_next <= k + capacity + 1, "stops within one token of the cancel"
        else:
            assert first.generated_before_next == n, "detach keeps generating for the absent reader"


@pytest.mark.parametrize("clock", ["virtual", "real"])
def test_hang_up_before_the_first_token_resumes_from_the_start(clock):
    for n in (1, 5):
        r = run(RunSpec(tokens=n, hang_up_after=0, retry_ms=5, clock=clock),
                LoopDriver.private() if clock == "real" else None)
        assert_complete(r, n)
        first, second = r.connections
        assert (first.tokens, first.last_event_id, first.ending) == (0, "", Ending.PEER_GONE)
        assert second.start_index == 0 and second.tokens == n


def test_cancel_stops_within_one_token_with_a_fast_reader():
    r = run(RunSpec(tokens=70, reader_ms=0, hang_up_after=18))
    assert r.connections[0].generated_before_next == 19


def test_drop_policies_pick_different_tokens():
    newest = run(RunSpec(policy="drop-newest", reader_ms=3))
    oldest = run(RunSpec(policy="drop-oldest", reader_ms=3))
    assert newest.ids != oldest.ids
    assert newest.ids[:4] == (0, 1, 2, 3)        # the first ones are kept, the incoming dropped
    assert oldest.ids[-1] == 69                  # the newest always survives


def test_done_frame_and_open_frame_on_the_wire():
    r = run(RunSpec(tokens=5, capacity=64))
    frames = r.frames[0]
    assert frames[0].startswith(b"retry: 750\n")
    assert b'"resumed": false, "start_index": 0, "policy": "block", "buffer": 64' in frames[0]
    assert frames[-1].startswith(b"id: 4\nevent: done\n")
    assert r.events_read == 7


@pytest.mark.parametrize("policy", POLICIES)
def test_policy_invariants_real_clock(policy):
    n, capacity = 40, 3
    r = run(RunSpec(tokens=n, policy=policy, capacity=capacity, reader_ms=1.0, producer_ms=0.2,
                    retry_ms=20, clock="real"), LoopDriver.private())
    assert r.stats.high_water <= capacity and r.generated_total == n
    assert list(r.ids) == sorted(set(r.ids))
    if policy in ("block", "disconnect"):
        assert_complete(r, n)
    else:
        assert len(r.ids) + r.stats.dropped == n


@pytest.mark.parametrize("on_disconnect", ["cancel", "detach"])
def test_resume_real_clock(on_disconnect):
    n = 40
    for k in (1, 7, 20, 39):
        r = run(RunSpec(tokens=n, capacity=4, reader_ms=0.5, producer_ms=0.2, hang_up_after=k,
                        on_disconnect=on_disconnect, retry_ms=5, clock="real"), LoopDriver.private())
        assert_complete(r, n)
        assert r.connections[0].tokens == k


@pytest.mark.parametrize("kwargs, message", [
    ({"tokens": 0}, "tokens must be an int from 1 to 277, got 0"),
    ({"tokens": 278}, "tokens must be an int from 1 to 277, got 278"),
    ({"reader_ms": float("nan")}, "reader_ms must be a finite number >= 0, got nan"),
    ({"producer_ms": -1}, "producer_ms must be a finite number >= 0, got -1"),
    ({"hang_up_after": 70}, "hang_up_after must be from 0 to tokens-1 (69), got 70"),
    ({"hang_up_after": -1}, "hang_up_after must be from 0 to tokens-1 (69), got -1"),
    ({"policy": "nope"}, "policy must be one of block, drop-newest, drop-oldest, disconnect, got 'nope'"),
    ({"capacity": 0}, "capacity must be an int from 1 to 65536, got 0"),
])
def test_spec_validation(kwargs, message):
    with pytest.raises(ValueError) as err:
        RunSpec(**kwargs)
    assert str(err.value) == message
