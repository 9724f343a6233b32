"""``python -m bench.compiled_lane``: serve, the same serve with its hot modules built by mypyc, and the Protocol
floor each deliver every stream whole, and the compiled copy really imports its compiled modules (no timing is
asserted: the figures mean something only on a quiet machine)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from support.requirements import ROOT, require_binary

N, TOKENS = 20, 30


def test_the_compiled_hot_path_delivers_every_stream_whole_beside_serve_and_the_floor() -> None:
    require_binary("gcc")                        # mypyc's C compiler (.ci/run installs it)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    done = subprocess.run([sys.executable, "-m", "bench.compiled_lane", "--rounds", "1", "--n", str(N), "--tokens",
                           str(TOKENS)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.stdout, done.stderr[-4000:])
    lines = done.stdout.splitlines()
    for name, line in zip(("tokenwire serve", "serve, compiled", "bench.floor_protocol"), lines[:3], strict=True):
        # The floor's CPU over a run this small may read 0 ticks of /proc's clock: then no ratio is printed.
        assert re.fullmatch(rf"{re.escape(name)}: \d+\.\d us a token \(rounds \d+\.\d\), (\d+\.\d\dx the floor|"
                            rf"no ratio \(the floor's CPU read 0 clock ticks\)); complete {N}/{N}", line), line
    assert lines[3].startswith(f"N={N}, {TOKENS} tokens at 20 ms, 1 interleaved rounds"), lines

