"""Item 16: what typed parts cost: CPU per log entry of the canned answer with tools against the plain text answer.

How this works: ``&parts=tools`` on the stream query asks for the canned
answer with every kind of part around its text (reasoning, a tool call's
start, argument deltas and end, its result, a step, usage, finish:
``tokenwire.core.model.canned_entries``), each one entry of the log and
one frame, paced like a token (20 ms each), so a stream of the 277-token
answer holds ``RunSpec(tokens=277, parts="tools").length`` entries (313).
Item 5's client counts every entry then (any event but ``open`` and
``done``, its id the next index) and checks them complete and contiguous.
``tokenwire serve`` and ``uvicorn tokenwire.asgi:app`` each serve both
answers, the four taking turns (``bench.side_by_side``: item 5's step,
interleaved rounds, medians of 3) at N=300; the figure is the server's CPU
per delivered entry (a token is an entry of the text answer); goal: tools
/ text <= 1.3x per entry on each server.
"""

from __future__ import annotations

import importlib.util

from tokenwire.core.pipeline import RunSpec

from .common import Row
from .scale import TOKENS, query
from .side_by_side import PRODUCER_MS, fmt_rounds, ratio_row, rounds, serve, tree_note, tree_state, uvicorn

__all__ = ["run"]

ITEM = 16
FULL_N, QUICK_N = 300, 40
QUICK_TOKENS = 50
FULL_ROUNDS, QUICK_ROUNDS = 3, 1
GOAL = 1.3


def run(quick: bool) -> list[Row]:
    missing = [m for m in ("uvicorn", "uvloop", "httptools") if importlib.util.find_spec(m) is None]
    if missing:
        return [Row(ITEM, "typed parts: CPU per entry", "not run",
                    notes=(f"{', '.join(missing)} missing: pip install -e '.[bench]'",))]
    n, tokens = (QUICK_N, QUICK_TOKENS) if quick else (FULL_N, TOKENS)
    count = QUICK_ROUNDS if quick else FULL_ROUNDS
    entries = RunSpec(tokens=tokens, parts="tools").length
    tools = f"/stream?{query(tokens)}&parts=tools"
    servers = [serve("serve text", n), serve("serve tools", n, path=tools, count=entries),
               uvicorn("tokenwire.asgi text", "tokenwire.asgi:app"),
               uvicorn("tokenwire.asgi tools", "tokenwire.asgi:app", path=tools, count=entries)]
    before = tree_state()
    done = rounds(ITEM, servers, n, tokens, count)
    how = f"median of {count} rounds" if count > 1 else "1 round"
    setup = (f"N={n} streams at {PRODUCER_MS:g} ms an entry: the text answer ({tokens} entries, all tokens) and "
             f"&parts=tools ({entries} entries: {entries - tokens} reasoning, tool-call, tool-result, step, usage "
             "and finish parts around the same text), item 5's client counting every entry; CPU per delivered "
             f"entry, {how}, interleaved (every even round in reverse order); serve as item 5 starts it, "
             f"tokenwire.asgi:app on item 9's uvicorn command line; tokenwire: {tree_note(before)}",
             *(f"{name}: {fmt_rounds(done, name)} us per entry" for name in done.steps if done.ran(name)))
    return [ratio_row(ITEM, f"N={n} serve: CPU per entry, tools / text ({how})", done, "serve tools", "serve text",
                      GOAL, setup),
            ratio_row(ITEM, f"N={n} ASGI app: CPU per entry, tools / text ({how})", done, "tokenwire.asgi tools",
                      "tokenwire.asgi text", GOAL, tuple(done.notes()))]
