"""The Redis log writer's gathering (group commit): while other streams append on the process, a round
is held for more appends, up to ``GATHER_S`` after its oldest append was queued; a lone stream's append is
never held; a full round, or a round with another command in it, goes at once.  On a real ``redis-server``,
both event loops.  The bound is made long here (a loaded test machine must not decide the outcome).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from support.live import await_until
from support.redis import redis_command

from tokenwire.redislog import writer as writer_module

LOOPS = ["asyncio", "uvloop"]
BOUND_S = 0.3          # the gathering bound, for these tests
SLACK_S = 0.25         # a loaded machine's round trip and loop turns on top of it


def _scene(redis_url: str, loop: str, monkeypatch: pytest.MonkeyPatch, n: int,
           body: Callable[[Any, list[str]], Awaitable[Any]]) -> Any:
    """Run ``body(aio log, stream ids)`` on a fresh loop, the ``n`` streams made and owned by it."""
    from tokenwire.realtime import new_loop
    from tokenwire.redislog.blocking import RedisTokenLog
    monkeypatch.setenv("TOKENWIRE_LOOP", loop)
    monkeypatch.setattr(writer_module, "GATHER_S", BOUND_S)
    log = RedisTokenLog(redis_url, name="A")
    ids = [f"g{i}" for i in range(n)]

    async def scene() -> Any:
        aio = log.aio
        await asyncio.gather(*(aio.create(sid, {}, 10) for sid in ids))
        assert all(claim.owned for claim in await asyncio.gather(*(aio.claim(sid) for sid in ids)))
        try:
            return await body(aio, ids)
        finally:
            for sid in ids:
                aio.disown(sid)
            await aio.close()
    running = new_loop()
    try:
        return running.run_until_complete(asyncio.wait_for(scene(), 30))
    finally:
        running.close()
        log.close()


async def _timed(aio: Any, sid: str, index: int) -> float:
    """Append and return how long the append took to be acknowledged."""
    started = asyncio.get_running_loop().time()
    await aio.append_future(sid, index, f"t{index}")
    return asyncio.get_running_loop().time() - started


@pytest.mark.parametrize("loop", LOOPS)
def test_a_round_gathers_appends_that_trickle_in_within_its_bound(redis_server, loop, monkeypatch):
    async def body(aio: Any, ids: list[str]) -> tuple[int, list[float]]:
        await asyncio.gather(*(aio.append(sid, 0, "t0") for sid in ids))        # one round of 8: siblings
        rounds = aio.writer.rounds
        timings = []
        for sid in ids:                     # one append every 20 ms, each from its own loop turn
            timings.append(asyncio.ensure_future(_timed(aio, sid, 1)))
            await asyncio.sleep(0.02)       # pacing the appends (what is tested), not ordering
        held = await asyncio.gather(*timings)
        return aio.writer.rounds - rounds, held
    used, held = _scene(redis_server.url, loop, monkeypatch, 8, body)
    assert used == 1                                       # the 8 appends, 140 ms apart first to last: one round
    assert BOUND_S - 0.01 <= held[0] <= BOUND_S + SLACK_S  # the first waited for the bound, and no longer
    assert all(h <= BOUND_S + SLACK_S for h in held)


@pytest.mark.parametrize("loop", LOOPS)
def test_a_lone_streams_append_is_not_held(redis_server, loop, monkeypatch):
    async def body(aio: Any, ids: list[str]) -> tuple[list[float], float]:
        held = [await _timed(aio, ids[0], i) for i in range(5)]     # one stream: each round carries one append
        return held, aio.writer.gathered_s
    held, gathered = _scene(redis_server.url, loop, monkeypatch, 1, body)
    assert gathered == 0.0
    assert all(h < BOUND_S for h in held), held


@pytest.mark.parametrize("loop", LOOPS)
def test_a_held_round_goes_at_once_when_full_or_when_a_command_comes(redis_server, loop, monkeypatch):
    monkeypatch.setattr(writer_module, "GATHER_APPENDS", 6)

    async def body(aio: Any, ids: list[str]) -> tuple[float, float, float]:
        await asyncio.gather(*(aio.append(sid, 0, "t0") for sid in ids))        # siblings
        full = [asyncio.ensure_future(_timed(aio, sid, 1)) for sid in ids[:6]]  # six: a full round
        full_s = max(await asyncio.gather(*full))
        lone = asyncio.ensure_future(_timed(aio, ids[6], 1))                    # held: the last round had six
        await await_until(lambda: aio.writer.holding, "the lone append's round to be held")
        started = asyncio.get_running_loop().time()
        assert await aio.ping()                                                 # a request's command
        ping_s = asyncio.get_running_loop().time() - started
        return full_s, ping_s, await lone
    full_s, ping_s, lone_s = _scene(redis_server.url, loop, monkeypatch, 8, body)
    assert full_s < BOUND_S, full_s                # GATHER_APPENDS queued: not held for the bound
    assert ping_s < BOUND_S and lone_s < BOUND_S, (ping_s, lone_s)    # the command took the held append along


@pytest.mark.parametrize("loop", LOOPS)
def test_commands_sent_again_after_noscript_keep_their_order(redis_server, loop, monkeypatch):
    """Redis forgot the scripts (a restart, SCRIPT FLUSH): a round's script commands are sent again in the order
    they were asked (a create, then the claim of the same stream, lands as a create then a claim)."""
    async def body(aio: Any, ids: list[str]) -> list[bool]:
        redis_command(aio.log.url, "SCRIPT", "FLUSH")             # as an operator
        fresh = [f"n{i}" for i in range(5)]
        owned = []
        for sid in fresh:                                    # each pair asked in one loop turn: one round
            made, claim = await asyncio.gather(aio.create(sid, {}, 10), aio.claim(sid))
            owned.append(claim.owned)
            aio.disown(sid)
        return owned
    assert _scene(redis_server.url, loop, monkeypatch, 1, body) == [True] * 5
