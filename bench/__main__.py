"""``python -m bench [--quick] [--only 1,2,...] [--json PATH]``: every benchmark, side by side, one table.

How this works: each item's module returns its rows; they are printed as
one table (stdout), with progress on stderr.  ``--quick`` shrinks every
item (fewer frames, fewer repeats, tiny server N) to stay under a minute;
the full run is what ``bench/RESULTS.md`` records.  An item that cannot
run (a peer library or the server missing) prints a row saying why
instead of stopping the others.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import sys
import time
import traceback
from dataclasses import asdict

from .common import Row, format_table, log, machine

# item number -> (module, what it measures); "R" is the resume line of the Redis log.
ITEMS: dict[str, tuple[str, str]] = {
    "1": ("bench.codec", "decoder and encoder vs httpx-sse, sseclient-py, sse-starlette"),
    "3": ("bench.pacing", "pacing on the real clock, block vs its floor"),
    "5": ("bench.scale", "server scale vs sse-starlette on uvicorn"),
    "P": ("bench.pages_beside", "report pages beside 200 streams"),
    "6": ("bench.memory", "memory, bounded vs unbounded"),
    "7": ("bench.coldstart", "cold start and render time"),
    "9": ("bench.asgi_scale", "the ASGI app vs sse-starlette on the same uvicorn, N=300"),
    "10": ("bench.kept", "memory per kept stream"),
    "11": ("bench.chat_scale", "CPU per token: the AI SDK's chat protocol vs tokenwire's frames, N=300, both servers"),
    "12": ("bench.proxy_scale", "CPU per token: tokenwire proxy vs a plain relay, OpenAI chunks vs frames, N=100"),
    "13": ("bench.metrics_cost", "CPU per token: /metrics counted vs not, N=300, both servers"),
    "14": ("bench.floors", "CPU per token against the floors and sse-starlette, N=300; N=1000 on both servers"),
    "15": ("bench.text_cost", "CPU per token of the text answer, now vs the commit before typed parts, both servers"),
    "16": ("bench.parts_cost", "CPU per entry, the canned answer with tools vs the text answer, both servers"),
    "17": ("bench.log_cost", "CPU per entry, the Redis log vs the memory log, text and typed parts, both servers"),
    "R": ("bench.resume", "resume latency, in-memory log vs Redis"),
}
# items 2 and 4 come with 1 and 3 (same module); the resume line prints as 8; "A" is the ASGI line, 9;
# F the floors (14), T the text answer against a baseline commit (15), Q the typed parts (16), L the log (17)
ALIASES = {"2": "1", "4": "3", "8": "R", "A": "9", "C": "11", "O": "12", "M": "13", "F": "14", "T": "15",
           "Q": "16", "L": "17"}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, under a minute")
    parser.add_argument("--only", default="", help="comma-separated items to run (1-7, 9-17, P, R), e.g. 1,3")
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    return parser


def _selected(only: str) -> list[str]:
    if not only:
        return list(ITEMS)
    picked = []
    for name in only.split(","):
        key = ALIASES.get(name.strip().upper(), name.strip().upper())
        if key not in ITEMS:
            raise SystemExit(f"python -m bench: unknown item {name!r}; expected some of 1-7, 9-17, P, R")
        if key not in picked:
            picked.append(key)
    return picked


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    started = time.perf_counter()
    load_start = os.getloadavg()
    rows: list[Row] = []
    for key in _selected(args.only):
        module, what = ITEMS[key]
        log(f"bench: item {key}: {what} ...")
        t0 = time.perf_counter()
        try:
            rows += importlib.import_module(module).run(args.quick)
        except Exception as exc:  # one broken item must not hide the others
            traceback.print_exc(file=sys.stderr)
            item = int(key) if key.isdigit() else 8
            rows.append(Row(item, what, "FAILED", notes=(f"{type(exc).__name__}: {exc}",)))
        log(f"bench: item {key} took {time.perf_counter() - t0:.1f} s")
    rows.sort(key=lambda r: r.item)
    total = time.perf_counter() - started
    mode = "python -m bench --quick" if args.quick else "python -m bench"
    print(f"tokenwire bench ({mode}) on {machine()}")
    print(format_table(rows))
    load_end = os.getloadavg()
    print(f"\ntotal wall time {total:.1f} s; 1-minute load average {load_start[0]:.2f} at the start, "
          f"{load_end[0]:.2f} at the end (on {os.cpu_count()} cores: above that, other work shared the machine)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"command": mode, "machine": machine(), "python": platform.python_version(),
                       "seconds": total, "load": [load_start, load_end], "rows": [asdict(r) for r in rows]}, f,
                      indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
