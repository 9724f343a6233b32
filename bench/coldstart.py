"""Item 7: cold start of the serverless path, and the in-process render time.

How this works: the serverless function is a fresh interpreter that
imports the handler and answers one request, so that is what is timed: a
subprocess running ``respond("GET", "/")`` (the handler's pure function;
the default virtual-clock report), against a subprocess running ``pass``,
which is the floor no Python function can go under.  The difference is
what tokenwire adds.  In process, the same call is timed many times after
a warm-up; the median is the figure, and a short profile names the
functions that dominate it.  While the report is not built yet this falls
back to running the default page's set of runs through ``pipeline.run``.
"""

from __future__ import annotations

import cProfile
import importlib.util
import io
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

from .common import ROOT, Row, env_with_root

__all__ = ["run"]

# Issue 12's goals: a render within 5 ms, a cold start within 2.5x a bare interpreter.
GOAL_MS = 5.0
GOAL_COLD = 2.5


def _target() -> tuple[str, str, Callable[[], object]]:
    """Return (what, the code a fresh process runs, the in-process call)."""
    if importlib.util.find_spec("tokenwire.handler") is not None:
        from tokenwire.handler import respond

        def call() -> object:
            status, _, body = respond("GET", "/")
            if status != 200:
                raise RuntimeError(f"the default report answered {status}: {body[:200]!r}")
            return body
        code = "from tokenwire.handler import respond; assert respond('GET', '/')[0] == 200"
        return "handler.respond('GET', '/'): default virtual report, text", code, call
    from tokenwire.core.pipeline import RunSpec
    from tokenwire.core.pipeline import run as run_pipeline
    specs = [RunSpec(capacity=64)] + [RunSpec(policy=p, reader_ms=3) for p in  # type: ignore[arg-type]
                                      ("block", "drop-newest", "drop-oldest", "disconnect")]
    code = ("from tokenwire.core.pipeline import RunSpec, run\n"
            "[run(RunSpec(capacity=64))] + [run(RunSpec(policy=p, reader_ms=3)) for p in "
            "('block', 'drop-newest', 'drop-oldest', 'disconnect')]")
    return "pipeline.run x5 (no handler yet)", code, lambda: [run_pipeline(s) for s in specs]


def _spawn_ms(code: str, runs: int, cache: str) -> float:
    """Median wall time in ms of ``runs`` fresh interpreters running ``code``.

    Bytecode is cached under ``cache`` (one untimed run fills it), as a
    deployed function has its modules compiled: this machine sets
    PYTHONDONTWRITEBYTECODE, which would otherwise time the compiler.
    """
    env = env_with_root()
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = cache
    times = []
    for i in range(runs + 1):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True,
                       stdout=subprocess.DEVNULL, timeout=120)
        if i:
            times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def _profile(call: Callable[[], object], calls: int = 5) -> str:
    """Return the three functions with the most own time over ``calls`` calls."""
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        call()
    prof.disable()
    stats = pstats.Stats(prof, stream=io.StringIO())
    total = stats.total_tt  # type: ignore[attr-defined]
    top = sorted(stats.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:3]  # type: ignore[attr-defined]
    return ", ".join(f"{fn[2]} ({fn[0].rsplit('/', 1)[-1]}:{fn[1]}) {tt / total:.0%}" for fn, (_, _, tt, _, _) in top)


def run(quick: bool) -> list[Row]:
    spawns, calls = (3, 30) if quick else (15, 300)
    what, code, call = _target()
    with tempfile.TemporaryDirectory(prefix="tokenwire-bench-pyc-") as cache:
        bare = _spawn_ms("pass", spawns, cache)
        cold = _spawn_ms(code, spawns, cache)
    call()  # warm: templates compiled, modules imported
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1e3)
    median = statistics.median(times)
    p95 = statistics.quantiles(times, n=20, method="inclusive")[18]
    notes = (f"{what}; cold: median of {spawns} fresh interpreters each, bytecode cached (one untimed run first); "
             f"render: median of {calls} calls after one warm-up (p95 {p95:.2f} ms)",
             f"profile of the in-process render, most own time: {_profile(call)}")
    return [
        Row(7, "cold start: fresh process, import + render, ms", f"{cold:.0f}", f"python -c pass {bare:.0f}",
            cold / bare, f"<= {GOAL_COLD:g}x", cold / bare <= GOAL_COLD, notes),
        Row(7, "in-process render of the default report, ms", f"{median:.2f}", "", None,
            f"<= {GOAL_MS:g} ms", median <= GOAL_MS, notes),
    ]
