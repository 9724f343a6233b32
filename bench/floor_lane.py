"""How far the Python of a lane can go: ``tokenwire serve`` with its caught-up lane cut to the least a token must do.

``python -m bench.floor_lane [--rounds 5] [--n 300] [--tokens 277]`` runs three servers side
by side (``bench.side_by_side.rounds``: item 5's step, interleaved, medians)
and prints each one's CPU per token (utime + stime):

- ``tokenwire serve``, as item 14 measures it;
- ``serve, least lane``: the same server, but a canned answer's token due
  for a reader waiting caught up takes the least path there is: the model's
  step, the memory log's append, the frame rendered with an f-string, the
  write held for the tick, the socket wire's counts, the next token timed.
  No channel, no metering, no heartbeat pushed back, no stream
  bookkeeping: what no redesign of the lane in Python can go below while it
  logs and writes (any other token, or a cancelled run, takes the real path);
- ``bench.floor_protocol``, item 14's floor (no log, preformatted frames).

The least lane is an experiment, not a server: it keeps no metrics and
counts nothing on the channel, so it is started only here, by patching
``Lanes.make`` in the server process (``python -m bench.floor_lane serve
...``), and every stream is still checked complete and contiguous.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .side_by_side import Server, floor_protocol, print_beside_floor, rounds, serve

__all__ = ["least_make", "main"]



def least_make(lanes: Any, p: Any) -> None:  # pragma: no cover - runs in the patched server process
    """``Lanes.make`` cut to the least a caught-up token must do (see the module); any other token, the real one."""
    run = p.run
    if type(run) is not RUN:
        return
    waiting = lanes._lot._parked.get(id(run.stream))
    if (waiting is None or len(waiting) != 1 or waiting[0].wire is None or type(waiting[0].effect) is not GET
            or waiting[0].effect.direct is None or run.steps.cancelled):
        REAL_MAKE(lanes, p)
        return
    reader, index = waiting[0], run.index
    steps: Any = run.steps                      # a CannedSteps: its model and log, as bound at the start
    wire = reader.wire
    token = steps._generate(index)
    steps._append(steps._sid, index, token)
    frame = f"id: {index}\nevent: token\ndata: {token}\n\n".encode()
    writes = wire._writes
    if writes.held is None:
        writes.holding()
    writes.held.append((wire.transport, frame))
    wire.bytes_sent += len(frame)
    wire.frames_sent += 1
    wire.tokens_sent += 1
    reader.effect.direct.last = index
    run.index = index + 1
    if run.index < run.end:
        p.deadline += steps.cost(run.index)
        lanes._timers.at(p.deadline, lanes._made, p)
        return
    p.run = None
    lanes._advance(p, run.index, None)


REAL_MAKE: Any = None      # the real ``Lanes.make``, the ``Run`` and ``Get`` effects' types: set in the server
RUN: Any = None
GET: Any = None


def _serve_least(argv: list[str]) -> int:  # pragma: no cover - the server process
    global REAL_MAKE, RUN, GET
    from tokenwire.cli import main as cli
    from tokenwire.core.effects import Get, Run
    from tokenwire.realtime import lanes
    REAL_MAKE, RUN, GET = lanes.Lanes.make, Run, Get
    lanes.Lanes.make = least_make  # type: ignore[method-assign,assignment]
    return cli(["serve", *argv])


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["serve"]:
        return _serve_least(args[1:])
    parser = argparse.ArgumentParser(prog="python -m bench.floor_lane")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--tokens", type=int, default=277, help="a stream's tokens, at 20 ms (item 5's answer: 277)")
    opts = parser.parse_args(args)
    full = serve("tokenwire serve", opts.n)
    least = Server("serve, least lane",
                   lambda port: [sys.executable, "-m", "bench.floor_lane", *full.command(port)[3:]])   # its flags
    servers = [full, least, floor_protocol()]
    done = rounds(0, servers, opts.n, opts.tokens, opts.rounds)
    return print_beside_floor(done, servers, opts.tokens, opts.rounds)

if __name__ == "__main__":
    raise SystemExit(main())
