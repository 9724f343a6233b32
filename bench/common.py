"""Shared pieces of the benchmarks: result rows, the table, timing, the machine.

How this works: every measurement module exposes ``run(quick) -> list[Row]``.
A ``Row`` carries one figure for tokenwire, the same figure for the peer or
baseline it is compared with, their ratio oriented so that bigger is better
for tokenwire where a goal says so, and whether the goal is met.  The table
prints the rows in order, then the notes each row carries.  Timed loops take
the best of several repeats: the minimum is the least disturbed by other
work on the machine, which is what a side-by-side ratio needs.
"""

from __future__ import annotations

import gc
import os
import platform
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

__all__ = ["Row", "best_time", "machine", "format_table", "ROOT", "env_with_root"]

# The repository root: subprocesses run from here so ``tokenwire`` and
# ``bench`` import without installing anything.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass(frozen=True)
class Row:
    """One line of the table.

    item: the issue's item number (1-7); name: what is measured; ours and
    peer: the figures as printed; ratio: ours relative to peer (None when
    there is no peer); goal: the goal as printed ("" if none); met: whether
    it is met (None when there is no goal); notes: printed under the table.
    """

    item: int
    name: str
    ours: str
    peer: str = ""
    ratio: float | None = None
    goal: str = ""
    met: bool | None = None
    notes: tuple[str, ...] = field(default=())


def best_time(fn: Callable[[], object], repeats: int) -> float:
    """Return the fastest of ``repeats`` calls of ``fn``, in seconds."""
    best = float("inf")
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def env_with_root() -> dict[str, str]:
    """Return os.environ with the repository root first on PYTHONPATH."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH", "")) if p)
    return env


def machine() -> str:
    """Return one line naming the cores, CPU model, Python and OS."""
    model = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return (f"{os.cpu_count()} cores, {model}, Python {platform.python_version()}"
            f" ({platform.python_implementation()}), {platform.system()} {platform.release()}")


_HEAD = ("#", "measurement", "tokenwire", "peer / baseline", "ratio", "goal", "met")


def _met(met: bool | None) -> str:
    return "" if met is None else ("yes" if met else "NO")


def format_table(rows: Sequence[Row]) -> str:
    """Return the rows as a fixed-width table followed by their notes."""
    cells = [_HEAD] + [(str(r.item), r.name, r.ours, r.peer,
                        "" if r.ratio is None else f"{r.ratio:.2f}x", r.goal, _met(r.met)) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(_HEAD))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    notes = list(_notes(rows))
    if notes:
        lines += ["", "notes:"] + notes
    return "\n".join(lines)


def _notes(rows: Iterable[Row]) -> Iterable[str]:
    seen: set[str] = set()
    for r in rows:
        for note in r.notes:
            if note not in seen:
                seen.add(note)
                yield f"  [{r.item}] {note}"


def log(message: str) -> None:
    """Print progress to stderr, so stdout holds only the table."""
    print(message, file=sys.stderr, flush=True)
