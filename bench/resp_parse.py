"""Issue 26 item 6: the log writer's reply parsing, hand-written (before) against hiredis's ``Reader`` (after).

How this works: the parser before is the ``Replies`` of ``tokenwire/redislog/resp.py`` as it was at
``BEFORE`` (read from git history, loaded as a module of its own); the parser after is today's.  One run
measures both, side by side, on a private ``redis-server``:

- the resume read of 1,000 entries, parsed alone: the bytes Redis answered ``READ`` (the log's resume read,
  ``read_after(id, -1)``) for a stream of 1,000 tokens, fed to each ``Replies`` in 64 KB pieces as the
  connection hands them over; the fastest of many reads;
- the same resume read end to end: ``AsyncRedisLog.read_after`` through the writer with each ``Replies``
  in turn, the median of many: this process's CPU (what the event loop every stream shares spends), and
  the wall time (Redis running the read and the round trip included);
- the writer's CPU per round (this process's CPU time, Redis's not counted) for two kinds of round: every
  one of 100 owned streams appends a token (all land: one comparison, nothing parsed, in both), and 100
  ``info`` reads (each reply parsed).

Variants take turns (ABAB...) so the machine's drift falls on both.  ``python -m bench.resp_parse``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from types import ModuleType
from typing import Any

import hiredis

import tokenwire.redislog.writer as writer_module
from tokenwire.core.model import ANSWER
from tokenwire.redislog import resp
from tokenwire.redislog.blocking import RedisTokenLog
from tokenwire.redislog.resp import pack
from tokenwire.redislog.scripts import READ

from .bench_resume import private_redis
from .common import ROOT, best_time, machine

# The last commit whose resp.py parsed replies by hand.
BEFORE = "08bdfbfbf9e056bca3cdcc810079b7887d8ea8b9"
ENTRIES = 1000
STREAMS = 100
ROUNDS = 200
TURNS = 5


def before_module() -> ModuleType:
    """``tokenwire.redislog.resp`` as it was at ``BEFORE`` (the hand-written parser)."""
    source = subprocess.run(["git", "show", f"{BEFORE}:tokenwire/redislog/resp.py"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout
    spec = importlib.util.spec_from_loader("resp_before", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    exec(compile(source, f"{BEFORE[:7]}:tokenwire/redislog/resp.py", "exec"), module.__dict__)
    return module


async def _stream(log: Any, tokens: int) -> str:
    stream_id = uuid.uuid4().hex
    await log.create(stream_id, {"seed": 1}, tokens)
    assert (await log.claim(stream_id)).owned
    await asyncio.gather(*(log.append_future(stream_id, i, ANSWER[i % len(ANSWER)]) for i in range(tokens)))
    return stream_id


async def _raw_reply(port: int, keys: tuple[str, str, str]) -> bytes:
    """The bytes Redis answers the resume read of a whole stream (read until hiredis says it is whole)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(pack(("EVAL", READ, 2, keys[0], keys[1], -1, -1)))
    data, whole = b"", hiredis.Reader()
    while True:
        piece = await reader.read(1 << 16)
        data += piece
        whole.feed(piece)
        if whole.gets() is not False:         # a list: the reply is whole
            writer.close()
            return data


def _parse_s(replies_class: type, data: bytes) -> float:
    """The fastest parse of ``data`` (one reply) by ``replies_class``, fed in 64 KB pieces."""
    pieces = [data[at:at + (1 << 16)] for at in range(0, len(data), 1 << 16)]
    loop = asyncio.new_event_loop()

    def once() -> None:
        stream = asyncio.StreamReader(loop=loop)
        for piece in pieces:
            stream.feed_data(piece)
        loop.run_until_complete(replies_class(stream).read())
    try:
        once()
        return best_time(once, 300)
    finally:
        loop.close()


async def _with(replies_class: type, url: str, body: Callable[[Any], Awaitable[float]]) -> float:
    """Run ``body(log)`` with the writer reading through ``replies_class`` (a fresh log: a fresh writer)."""
    writer_module.Replies = replies_class         # type: ignore[attr-defined]
    log = RedisTokenLog(url).aio
    try:
        return await body(log)
    finally:
        await log.close()
        writer_module.Replies = resp.Replies      # type: ignore[attr-defined]


def _resume_read(stream_id: str, clock: Callable[[], float]) -> Callable[[Any], Awaitable[float]]:
    """A resume read's median on ``clock`` (wall: ``perf_counter``; this process's CPU: ``process_time``)."""
    async def body(log: Any) -> float:
        await log.read_after(stream_id, -1)       # the connection and the scripts, before timing
        times = []
        for _ in range(50):
            start = clock()
            got = await log.read_after(stream_id, -1)
            times.append(clock() - start)
            assert len(got) == ENTRIES
        return statistics.median(times)
    return body


async def _append_rounds(log: Any) -> float:
    ids = []
    for _ in range(STREAMS):
        stream_id = uuid.uuid4().hex
        await log.create(stream_id, {"seed": 1}, ROUNDS + 1)
        assert (await log.claim(stream_id)).owned
        ids.append(stream_id)
    await asyncio.gather(*(log.append_future(s, 0, "warm") for s in ids))
    rounds, cpu = log.writer.rounds, time.process_time()
    for i in range(1, ROUNDS + 1):
        await asyncio.gather(*(log.append_future(s, i, ANSWER[i % len(ANSWER)]) for s in ids))
    return (time.process_time() - cpu) / (log.writer.rounds - rounds)


def _info_rounds(stream_id: str) -> Callable[[Any], Awaitable[float]]:
    async def body(log: Any) -> float:
        await log.info(stream_id)
        rounds, cpu = log.writer.rounds, time.process_time()
        for _ in range(ROUNDS):
            await asyncio.gather(*(log.info(stream_id) for _ in range(STREAMS)))
        return (time.process_time() - cpu) / (log.writer.rounds - rounds)
    return body


def _turns(run: Callable[[type], float], variants: dict[str, type]) -> dict[str, float]:
    """Each variant's median over ``TURNS`` turns, the variants taking turns."""
    got: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(TURNS):
        for name, replies_class in variants.items():
            got[name].append(run(replies_class))
    return {name: statistics.median(values) for name, values in got.items()}


def main() -> int:
    variants = {"before (by hand)": before_module().Replies, "after (hiredis)": resp.Replies}
    with private_redis() as url:
        if url is None:
            print("redis-server is not installed", file=sys.stderr)
            return 1
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        setup = RedisTokenLog(url)
        stream_id = asyncio.run(_stream(setup.aio, ENTRIES))
        data = asyncio.run(_raw_reply(port, setup.keys(stream_id)))
        rows = [
            (f"resume read of {ENTRIES} entries, parsed alone ({len(data):,} bytes)", "us",
             _turns(lambda c: _parse_s(c, data) * 1e6, variants)),
            (f"resume read of {ENTRIES} entries, end to end: this process's CPU", "us",
             _turns(lambda c: asyncio.run(_with(c, url, _resume_read(stream_id, time.process_time))) * 1e6,
                    variants)),
            (f"resume read of {ENTRIES} entries, end to end: wall (Redis's work and the round trip included)", "us",
             _turns(lambda c: asyncio.run(_with(c, url, _resume_read(stream_id, time.perf_counter))) * 1e6,
                    variants)),
            (f"writer CPU per round: {STREAMS} appends, all landed", "us",
             _turns(lambda c: asyncio.run(_with(c, url, _append_rounds)) * 1e6, variants)),
            (f"writer CPU per round: {STREAMS} info reads", "us",
             _turns(lambda c: asyncio.run(_with(c, url, _info_rounds(stream_id))) * 1e6, variants)),
        ]
    names = list(variants)
    print(f"issue 26 item 6: reply parsing, python -m bench.resp_parse, on {machine()}")
    print(f"before = tokenwire/redislog/resp.py at {BEFORE[:7]}; medians of {TURNS} turns taken in turn")
    print(f"| measurement | {names[0]} | {names[1]} | before / after |")
    print("| --- | ---: | ---: | ---: |")
    for name, unit, figures in rows:
        b, a = figures[names[0]], figures[names[1]]
        print(f"| {name} | {b:,.1f} {unit} | {a:,.1f} {unit} | {b / a:.1f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
