"""Item 17: what the Redis log costs the server: CPU per entry on Redis against the memory log, side by side.

How this works: one ``redis-server`` of the item's own (``bench.redis_scale.RedisServer``: loopback, nothing
on disk) for the whole item; ``tokenwire serve`` and ``uvicorn tokenwire.asgi:app`` each serve item 5's
stream (N=300 streams of the 277-token answer at 20 ms) on the memory log and on that Redis (``--log`` /
``TOKENWIRE_LOG_URL``), and on Redis the canned answer with typed parts too (``&parts=tools``: reasoning,
a tool call streamed in pieces, its result, a step, usage and finish around the same text, each an entry
of the log and a frame).  The six take turns (``bench.side_by_side``: item 5's step, interleaved rounds,
medians of 3); the figure is the server's CPU per delivered entry.  Goals (issue 34): on each server, the
Redis log <= 1.2x the memory log's, for the text answer and for the typed parts (against the memory log's
typed parts: item 16 holds typed parts against text).
"""

from __future__ import annotations

import importlib.util
import shutil

from tokenwire.core.pipeline import RunSpec

from .common import Row
from .parts_cost import FULL_N, FULL_ROUNDS, QUICK_N, QUICK_ROUNDS, QUICK_TOKENS  # item 16's sizes and rounds
from .redis_scale import SERVERS, RedisServer
from .scale import TOKENS, query
from .side_by_side import PRODUCER_MS, Server, fmt_rounds, ratio_row, rounds, tree_note, tree_state

__all__ = ["run"]

ITEM = 17
GOAL = 1.2
SERVE, ASGI = "tokenwire serve", "uvicorn tokenwire.asgi:app"
SHORT = {SERVE: "serve", ASGI: "tokenwire.asgi"}


def _servers(url: str, n: int, tools: str, entries: int) -> list[Server]:
    made = []
    for server, command in SERVERS.items():
        short = SHORT[server]
        made += [Server(f"{short} memory", command("memory", n)), Server(f"{short} redis", command(url, n)),
                 Server(f"{short} memory tools", command("memory", n), path=tools, count=entries),
                 Server(f"{short} redis tools", command(url, n), path=tools, count=entries)]
    return made


def run(quick: bool) -> list[Row]:
    missing = [m for m in ("uvicorn", "uvloop", "httptools", "redis") if importlib.util.find_spec(m) is None]
    if missing or shutil.which("redis-server") is None:
        why = f"{', '.join(missing)} missing: pip install -e '.[bench,redis]'" if missing else "no redis-server"
        return [Row(ITEM, "the Redis log: CPU per entry", "not run", notes=(why,))]
    n, tokens = (QUICK_N, QUICK_TOKENS) if quick else (FULL_N, TOKENS)
    count = QUICK_ROUNDS if quick else FULL_ROUNDS
    entries = RunSpec(tokens=tokens, parts="tools").length
    tools = f"/stream?{query(tokens)}&parts=tools"
    before = tree_state()
    redis = RedisServer()
    try:
        done = rounds(ITEM, _servers(redis.url, n, tools, entries), n, tokens, count)
    finally:
        redis.stop()
    how = f"median of {count} rounds" if count > 1 else "1 round"
    setup = (f"N={n} streams at {PRODUCER_MS:g} ms an entry, item 5's client: the text answer ({tokens} entries) "
             f"and &parts=tools ({entries} entries), on the memory log and on one loopback redis-server shared by "
             f"the item's rounds; CPU per delivered entry, {how}, interleaved (every even round in reverse order); "
             f"serve as redis_scale starts it, the ASGI app on item 9's uvicorn command line; tokenwire: "
             f"{tree_note(before)}",
             *(f"{name}: {fmt_rounds(done, name)} us per entry" for name in done.steps if done.ran(name)))
    rows = []
    for server in SERVERS:
        short = SHORT[server]
        rows += [ratio_row(ITEM, f"N={n} {short}: CPU per token, Redis / memory ({how})", done, f"{short} redis",
                           f"{short} memory", GOAL, setup if server == SERVE else ()),
                 ratio_row(ITEM, f"N={n} {short}: CPU per entry with typed parts, Redis / memory ({how})", done,
                           f"{short} redis tools", f"{short} memory tools", GOAL,
                           tuple(done.notes()) if server == ASGI else ())]
    return rows
