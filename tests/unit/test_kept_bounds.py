"""What ``Kept`` holds in memory (each chat's stream, each response's record) is bounded in count, in bytes and in
age: before, only the count bounded it (1,024 records of a 1 MB model each: about 1 GiB, kept for ever)."""

from __future__ import annotations

import asyncio

from tokenwire.core.clock import RealClock
from tokenwire.endpoints.kept import MAX_KEPT_BYTES, Kept
from tokenwire.endpoints.registry import Registry

S = 1_000_000_000


class Clock(RealClock):
    """A clock a test sets."""

    def __init__(self) -> None:
        super().__init__()
        self.at = 0

    def now(self) -> int:
        return self.at


def registry(clock: Clock | None = None, **limits: int) -> Registry:
    return Registry(clock=clock or Clock(), **limits)


def kept_values(kept: Kept, *keys: str) -> list[str | None]:
    return [asyncio.run(kept.get(key)) for key in keys]


def test_past_max_streams_the_one_put_longest_ago_goes() -> None:
    kept = Kept(registry(max_streams=3), "chat")
    for key in "abcd":
        asyncio.run(kept.put(key, key * 3))
    assert kept_values(kept, "a", "b", "c", "d") == [None, "bbb", "ccc", "ddd"]


def test_past_max_bytes_the_one_put_longest_ago_goes_and_one_too_big_is_not_kept() -> None:
    assert MAX_KEPT_BYTES == 4 << 20
    kept = Kept(registry(), "response", max_bytes=100)
    for key in ("r1", "r2", "r3"):
        asyncio.run(kept.put(key, "x" * 38))                    # 40 characters each, key included
    assert kept_values(kept, "r1", "r2", "r3") == [None, "x" * 38, "x" * 38]
    asyncio.run(kept.put("r2", "y"))                            # put again: its old size is given back
    asyncio.run(kept.put("r4", "z" * 50))
    assert kept_values(kept, "r2", "r3", "r4") == ["y", "x" * 38, "z" * 50]
    asyncio.run(kept.put("huge", "m" * 1_000_000))
    assert (kept_values(kept, "huge"), len(kept)) == ([None], 0)


def test_a_value_is_forgotten_when_the_logs_streams_are() -> None:
    clock = Clock()
    kept = Kept(registry(clock, max_age_ns=10 * S), "response")
    assert kept.max_age_ns == 10 * S
    asyncio.run(kept.put("old", "1"))
    clock.at = 6 * S
    asyncio.run(kept.put("new", "2"))
    clock.at = 10 * S
    assert kept_values(kept, "old", "new") == ["1", "2"]
    clock.at = 10 * S + 1
    assert kept_values(kept, "old", "new") == [None, "2"]
    clock.at = 20 * S
    asyncio.run(kept.put("newest", "3"))                        # a put forgets the old ones too
    assert (len(kept), kept_values(kept, "newest")) == (1, ["3"])
