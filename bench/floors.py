"""Item 14: the hot path against its floors, side by side: CPU per token at N=300, then N=1000 on both servers.

How this works: five servers take turns (``bench.side_by_side``: item 5's
step, rounds interleaved, each figure the median of 3 rounds) at N=300
streams of the 277-token answer at 20 ms (item 5's stream), read by item
5's client (``bench.scale_client``: every stream checked complete and
contiguous, its ``done`` included):

- ``tokenwire serve`` (as item 5 starts it) and its floor,
  ``bench.floor_protocol``: a bare asyncio Protocol on uvloop writing
  preformatted ``token`` frames on 20 ms timers, then ``done``;
- ``uvicorn tokenwire.asgi:app`` and its floor ``uvicorn bench.floor_asgi:app``
  (a bare ASGI callable sending preformatted frames between
  ``asyncio.sleep(0.02)``), and sse-starlette (``bench.peer_app:app``),
  all three on item 9's uvicorn command line (uvloop, httptools).

The ratios against their goals: serve / its floor <= 1.5x, the ASGI app /
its floor <= 1.3x, each of the two / sse-starlette <= 0.6x.  Then N=1000
on serve and on the ASGI app (3 interleaved rounds if the item's time
budget allows, else fewer, as the row says): every stream complete and
contiguous, TTFT p95 <= 1 s, ITL p95 <= 1.25x the nominal 20 ms (the
timing model's jitter of +-10% puts a perfect server near 1.09x).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import statistics
import time

from .common import Row
from .scale import MAX_TTFT_P95_MS, TOKENS
from .side_by_side import (
    PRODUCER_MS,
    Rounds,
    Server,
    floor_protocol,
    fmt_rounds,
    ratio_row,
    rounds,
    serve,
    tree_note,
    tree_state,
    uvicorn,
)

__all__ = ["run"]

ITEM = 14
FULL_N, FULL_BIG, QUICK_N, QUICK_BIG = 300, 1000, 40, 100
QUICK_TOKENS = 50
FULL_ROUNDS, QUICK_ROUNDS = 3, 1
BUDGET_S = 720.0      # the whole item: N=1000's later rounds are not started past it
GOAL_SERVE_FLOOR, GOAL_ASGI_FLOOR, GOAL_PEER = 1.5, 1.3, 0.6
GOAL_ITL = 1.25

SERVE, FLOOR, ASGI, AFLOOR, PEER = ("tokenwire serve", "bench.floor_protocol", "tokenwire.asgi", "bench.floor_asgi",
                                    "sse-starlette")


def _servers(n: int) -> list[Server]:
    return [serve(SERVE, n), floor_protocol(), uvicorn(ASGI, "tokenwire.asgi:app"),
            uvicorn(AFLOOR, "bench.floor_asgi:app"), uvicorn(PEER, "bench.peer_app:app")]


def _big_row(done: Rounds, name: str, wanted: int) -> Row:
    goal = f"all, <= {MAX_TTFT_P95_MS / 1e3:g} s, <= {GOAL_ITL:g}x"
    steps = done.steps.get(name, [])
    label = f"N={done.n} {name}: complete | TTFT p95 | ITL p95/nom."
    if not steps:
        return Row(ITEM, label, "not run", "", None, goal, None, (f"{name}: {done.failed.get(name, 'did not run')}",))
    ttfts = [s.ttft_p95_ms for s in steps]
    itls = [s.p95_ratio for s in steps]
    if None in ttfts or None in itls:
        return Row(ITEM, label, f"{done.completes(name)} | - | -", "", None, goal, False,
                   (f"{name} N={done.n}: a round delivered no tokens",))
    ttft = statistics.median(t for t in ttfts if t is not None)
    itl = statistics.median(r for r in itls if r is not None)
    how = f"median of {len(steps)} rounds" if len(steps) > 1 else "1 round"
    notes: tuple[str, ...] = ()
    if len(steps) < wanted:
        notes = (f"N={done.n}: {len(steps)} of {wanted} rounds: the item's time budget ({BUDGET_S:g} s) was spent",)
    met = done.complete(name) and ttft <= MAX_TTFT_P95_MS and itl <= GOAL_ITL
    return Row(ITEM, f"{label} ({how})", f"{done.completes(name)} | {ttft:.0f} ms | {itl:.2f}x", "", None, goal, met,
               notes)


def run(quick: bool) -> list[Row]:
    needed = ("uvicorn", "uvloop", "httptools", "sse_starlette")
    missing = [m for m in needed if importlib.util.find_spec(m) is None]
    if missing:
        return [Row(ITEM, "floors: CPU per token", "not run",
                    notes=(f"{', '.join(missing)} missing: pip install -e '.[bench]'",))]
    start = time.monotonic()
    n, big, tokens = (QUICK_N, QUICK_BIG, QUICK_TOKENS) if quick else (FULL_N, FULL_BIG, TOKENS)
    count = QUICK_ROUNDS if quick else FULL_ROUNDS
    before = tree_state()
    done = rounds(ITEM, _servers(n), n, tokens, count)
    how = f"median of {count} rounds" if count > 1 else "1 round"
    setup = (f"N={n} streams of {tokens} tokens at {PRODUCER_MS:g} ms, item 5's client; CPU = the server's utime + "
             f"stime over the client's run / tokens delivered; {count} round(s), interleaved (every even round in "
             "reverse order); serve as item 5 starts it, the three uvicorn apps on item 9's command line "
             "(--loop uvloop --http httptools --no-access-log --backlog 4096); the floors send preformatted frames "
             f"on 20 ms timers and nothing else; tokenwire: {tree_note(before)}")
    rows = [Row(ITEM, f"N={n} CPU per token, us ({how}): {name}",
                f"{fmt_rounds(done, name)}, {done.completes(name)}" if done.ran(name) else "not run",
                notes=(setup,) if name == SERVE else ())
            for name in (SERVE, FLOOR, ASGI, AFLOOR, PEER)]
    rows += [ratio_row(ITEM, f"N={n} serve / its floor (bare Protocol)", done, SERVE, FLOOR, GOAL_SERVE_FLOOR),
             ratio_row(ITEM, f"N={n} ASGI app / its floor (bare ASGI, same uvicorn)", done, ASGI, AFLOOR,
                       GOAL_ASGI_FLOOR),
             ratio_row(ITEM, f"N={n} serve / sse-starlette", done, SERVE, PEER, GOAL_PEER),
             ratio_row(ITEM, f"N={n} ASGI app / sse-starlette (same uvicorn)", done, ASGI, PEER, GOAL_PEER,
                       tuple(done.notes()))]
    wanted = QUICK_ROUNDS if quick else FULL_ROUNDS
    large = rounds(ITEM, [serve(SERVE, big), uvicorn(ASGI, "tokenwire.asgi:app")], big, tokens, wanted,
                   deadline=start + BUDGET_S)
    rows += [_big_row(large, name, wanted) for name in (SERVE, ASGI)]
    rows[-1] = dataclasses.replace(rows[-1], notes=rows[-1].notes + tuple(large.notes()))
    return rows
