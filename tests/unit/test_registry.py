"""The registry of live streams (``tokenwire.endpoints.registry``): unguessable ids, what it knows and forgets as
the log does, a stream rebuilt from the log's meta, the cut used once, and the open-stream limit."""

from __future__ import annotations

import pytest

from tokenwire.core.pipeline import RunSpec
from tokenwire.core.tokenlog import MemoryTokenLog, UnknownStream
from tokenwire.endpoints.registry import STREAM_ID_BYTES, Busy, Registry


def test_stream_ids_are_random_url_safe_and_unique() -> None:
    registry = Registry()
    ids = {registry.create(RunSpec(tokens=5)).stream_id for _ in range(200)}
    assert len(ids) == 200
    assert all(len(i) == 22 and set(i) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
               for i in ids)
    assert STREAM_ID_BYTES * 8 >= 128


def test_get_knows_only_made_streams_and_forgets_what_the_log_evicted() -> None:
    now = [0]
    registry = Registry(MemoryTokenLog(lambda: now[0], max_age_ns=1000))
    live = registry.create(RunSpec(tokens=5))
    assert registry.get(live.stream_id) is live
    with pytest.raises(UnknownStream):
        registry.get("nope")
    now[0] = 5000
    registry.log.expire()                                   # type: ignore[attr-defined]
    with pytest.raises(UnknownStream):
        registry.get(live.stream_id)
    assert len(registry) == 0


def test_a_stream_in_the_log_but_not_in_the_registry_is_rebuilt_from_its_meta() -> None:
    log = MemoryTokenLog(lambda: 0)
    made = Registry(log).create(RunSpec(tokens=7, capacity=3, policy="drop-newest"), cut_after=2)  # type: ignore[arg-type]
    joined = Registry(log).get(made.stream_id)          # another registry on the same (shared) log
    assert (joined.stream.total, joined.stream.capacity, joined.stream.policy.value) == (7, 3, "drop-newest")
    assert joined.take_cut(None) is None                # the one-time cut stays with the instance that made it


def test_the_cut_is_used_once() -> None:
    live = Registry().create(RunSpec(tokens=10), cut_after=4)
    assert live.take_cut(None) == 4
    assert live.take_cut(None) is None and live.take_cut(6) is None
    other = Registry().create(RunSpec(tokens=10))
    assert other.take_cut(6) == 6 and other.take_cut(6) is None


def test_the_open_stream_limit_raises_busy_and_frees_its_slot() -> None:
    registry = Registry(max_live=1)
    with registry.connection():
        with pytest.raises(Busy, match="at most 1"):
            with registry.connection():
                pass
    with registry.connection():
        assert registry.live == 1 and registry.peak_live == 1
    assert registry.live == 0
    with pytest.raises(ValueError, match="max_live must be a positive int, got 0"):
        Registry(max_live=0)
