"""Placeholder until the report lands: prints a summary of one default run."""

from __future__ import annotations

from .core.metrics import timing_from_arrivals
from .core.pipeline import RunSpec, run


def cli_main(argv: list[str]) -> int:
    if argv:
        import sys
        print(f"tokenwire report: unexpected arguments {argv!r}", file=sys.stderr)
        return 2
    for policy in ("block", "drop-newest", "drop-oldest", "disconnect"):
        result = run(RunSpec(policy=policy, reader_ms=3))
        timing = timing_from_arrivals(result.arrivals_ns)
        print(f"{policy:<12} delivered {len(result.ids)} of {result.spec.tokens}  dropped {result.stats.dropped}"
              f"  high water {result.stats.high_water}  wall {result.wall_ns / 1e6:.1f} ms  ttft {timing.ttft_ms:.2f} ms")
    return 0
