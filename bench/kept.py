"""Item 10: memory per kept stream, what a live server holds for each finished stream it keeps for resume.

How this works: a fresh interpreter (``python -m bench.kept STREAMS``) makes
``STREAMS`` streams of the full answer through a live ``Registry``, exactly
as ``tokenwire serve`` makes them (no per-token trace), runs each to
``done`` on the virtual clock with a reader that keeps nothing, and reads
with ``tracemalloc`` what stays allocated once they are all finished and
kept.  The log's list of the tokens' text is reported on its own: the goal
is at most 4 KiB per stream on top of it.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import tracemalloc
from typing import Any

from tokenwire.core.clock import VirtualClock
from tokenwire.core.model import ANSWER
from tokenwire.core.pipeline import RunSpec
from tokenwire.core.simulate import Simulation
from tokenwire.core.tokenlog import MemoryTokenLog
from tokenwire.endpoints.registry import Registry

from .common import ROOT, Row, env_with_root

__all__ = ["run"]

GOAL_BYTES = 4096


class _Null:
    """A reader that takes every frame at once and keeps nothing."""

    def ready_at(self) -> int:
        return 0

    def deliver(self, frame: bytes, now: int) -> bool:
        return True


def measure(streams: int) -> dict[str, Any]:
    clock = VirtualClock()
    log = MemoryTokenLog(clock.now, max_streams=streams + 1)
    registry = Registry(log, max_streams=streams + 1)

    def one() -> None:
        live = registry.create(RunSpec(tokens=len(ANSWER)))
        sim = Simulation(clock)
        sim.spawn(live.stream.serve(-1, live.stream.new_channel()), _Null())
        sim.run()
    one()                                   # caches (costs, the answer's tuple, templates) made before counting
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for _ in range(streams):
        one()
    gc.collect()
    after = tracemalloc.take_snapshot()
    total = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    token_lists = sum(sys.getsizeof(entry.tokens) for entry in log._streams.values()) / (streams + 1)
    return {"streams": streams, "tokens": len(ANSWER), "bytes_per_stream": total / streams,
            "token_list_bytes": token_lists}


def run(quick: bool) -> list[Row]:
    streams = 200 if quick else 2000
    out = subprocess.run([sys.executable, "-m", "bench.kept", str(streams)], cwd=ROOT, env=env_with_root(),
                         capture_output=True, text=True, timeout=300, check=True)
    got = json.loads(out.stdout)
    per, text = got["bytes_per_stream"], got["token_list_bytes"]
    notes = (f"{streams} finished streams of {got['tokens']} tokens kept by a live Registry (as tokenwire serve "
             f"keeps them: no per-token trace), tracemalloc in a fresh interpreter; the token text is the log's "
             f"list of the tokens ({text:.0f} B a stream; the strings themselves are the answer's, shared)",)
    return [Row(10, "memory per kept stream, beyond its token text", f"{per - text:.0f} B", f"total {per:.0f} B",
                None, f"<= {GOAL_BYTES} B", per - text <= GOAL_BYTES, notes)]


if __name__ == "__main__":
    print(json.dumps(measure(int(sys.argv[1]))))
