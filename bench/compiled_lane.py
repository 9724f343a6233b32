"""What compiling the per-token path buys: ``tokenwire serve`` with its hot modules built by mypyc, beside serve.

``python -m bench.compiled_lane [--rounds 3] [--n 300] [--tokens 277]``
copies the working tree's ``tokenwire/`` into a temporary directory, builds
the modules a caught-up token crosses (``HOT_MODULES``: the driver and its
lanes, timers, held writes and parking lot, the stream, its channel and
exchange, the canned source, the memory log, the writer, the metering and
the socket wire) with ``mypyc`` there, checks that a process started there
imports the compiled ones, and runs three servers side by side
(``bench.side_by_side.rounds``: interleaved, medians): ``tokenwire serve``
as item 14 runs it, the same code compiled, and ``bench.floor_protocol``.
Each prints its CPU per token (utime + stime) and its ratio to the floor.

Why: issue 34 asks for serve at 1.5x its floor.  ``bench.floor_lane``
bounds what any lane in Python can reach; this measures the other way out
its note names, a compiled lane, with the same code rather than a second
one written in C.  It is a measurement, not a build of the package: the
package stays pure Python (see ``bench/RESULTS.md`` for what was found).
Needs mypy (the ``test`` extra) and a C compiler; the temporary directory
is removed when it ends, also on failure.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .common import ROOT
from .side_by_side import Server, floor_protocol, print_beside_floor, rounds, serve

__all__ = ["HOT_MODULES", "build", "main"]

HOT_MODULES = (
    "tokenwire/realtime/driver.py", "tokenwire/realtime/lanes.py", "tokenwire/realtime/timers.py",
    "tokenwire/realtime/held.py", "tokenwire/realtime/parking.py", "tokenwire/realtime/procs.py",
    "tokenwire/core/stream.py", "tokenwire/core/channel.py", "tokenwire/core/exchange.py",
    "tokenwire/core/sources.py", "tokenwire/core/tokenlog.py", "tokenwire/core/connection.py",
    "tokenwire/endpoints/metering.py", "tokenwire/live/sockets.py",
)
BUILD_TIMEOUT_S = 600        # mypyc and gcc over 14 modules: about 30 s on the 2-core VM


class BuildError(RuntimeError):
    """The compiled copy could not be built or would not import its compiled modules."""


def build(into: Path) -> None:
    """Copy ``tokenwire/`` into ``into`` and compile ``HOT_MODULES`` there; raises ``BuildError``."""
    shutil.copytree(Path(ROOT) / "tokenwire", into / "tokenwire", ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run([sys.executable, "-m", "mypyc", *HOT_MODULES], cwd=into, capture_output=True, text=True,
                          timeout=BUILD_TIMEOUT_S)
    if done.returncode != 0:
        raise BuildError(f"mypyc exited with {done.returncode}: {(done.stderr or done.stdout)[-2000:]}")
    probe = "import tokenwire.realtime.lanes as m, tokenwire.core.stream as s; print(m.__file__); print(s.__file__)"
    where = subprocess.run([sys.executable, "-c", probe], cwd=into, capture_output=True, text=True, timeout=60)
    files = where.stdout.split()
    if where.returncode != 0 or len(files) != 2 or not all(f.endswith(".so") and f.startswith(str(into))
                                                           for f in files):
        raise BuildError(f"a process in {into} did not import the compiled modules: {where.stdout!r} "
                         f"{where.stderr[-500:]!r}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.compiled_lane")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--tokens", type=int, default=277, help="a stream's tokens, at 20 ms (item 5's answer: 277)")
    opts = parser.parse_args(sys.argv[1:] if argv is None else argv)
    with tempfile.TemporaryDirectory(prefix="tokenwire-compiled-") as tmp:
        try:
            build(Path(tmp))
        except (BuildError, OSError, subprocess.TimeoutExpired) as exc:
            print(f"the compiled copy could not be built: {exc}", file=sys.stderr)
            return 2
        python = serve("tokenwire serve", opts.n)
        compiled = serve("serve, compiled", opts.n, cwd=tmp)
        servers: list[Server] = [python, compiled, floor_protocol()]
        done = rounds(0, servers, opts.n, opts.tokens, opts.rounds)
    return print_beside_floor(done, servers, opts.tokens, opts.rounds)

if __name__ == "__main__":
    raise SystemExit(main())
