"""The runs a report is made of: the page's plan, the demo's part of it, and how long they take.

How this works: ``plan(params)`` names the runs the page needs, each a
``RunSpec`` on the visitor's clock:

- ``baseline``: a fast reader (0 ms) under ``block`` with a buffer of 64;
  its frames are section 1 and its arrival times section 2;
- one run per policy (``block``, ``drop-newest``, ``drop-oldest``,
  ``disconnect``) with the visitor's buffer and reader: section 3; the
  ``block`` run is also the uninterrupted reference for section 4;
- ``cancel`` and ``detach``: ``block``, the reader hangs up after
  ``cut_after`` tokens and reconnects with its last event id: section 4.

``tokenwire demo`` makes part of the same plan (``plan_demo``: ``DEMO_RUNS``
with ``DEMO_PARAMS``) over loopback sockets on the real clock.
``estimate_wall_ms`` says how long a run takes without running it, so the
page's trim note and the demo's banner can quote ``demo_estimate_s``;
``virtual_wall_ms`` runs the page's plan on the virtual clock, which is what
a ``clock=real`` request is judged by before anything runs in real time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from ..core.channel import Policy
from ..core.model import ANSWER
from ..core.pipeline import ClockKind, RunResult, RunSpec, run
from ..core.stream import OnDisconnect
from .params import ReportParams

__all__ = [
    "BASELINE_BUFFER",
    "DEMO_CONNECTIONS",
    "DEMO_ESTIMATE_S",
    "DEMO_PARAMS",
    "DEMO_RUNS",
    "POLICIES",
    "RUN_NAMES",
    "demo_estimate_s",
    "estimate_wall_ms",
    "plan",
    "plan_demo",
    "virtual_wall_ms",
]

POLICIES = ("block", "drop-newest", "drop-oldest", "disconnect")
# The baseline's buffer: larger than anything a fast reader lets queue, so
# section 1 and 2 show the protocol with nothing in the way.
BASELINE_BUFFER = 64
# ``tokenwire demo``'s defaults: the full answer, a 6 ms reader against a
# 4-slot buffer, on the real clock; its runs are these names of the plan.
DEMO_PARAMS = ReportParams(clock="real", tokens=len(ANSWER), buffer=4, reader_ms=6.0, producer_ms=0.5,
                           cut_after=18, seed=1)
DEMO_RUNS = ("baseline", "block", "drop-newest", "cancel")
LOSSY = (Policy.DROP_NEWEST, Policy.DROP_OLDEST)
# Over the demo's sockets a lossy reader also gets what the kernel held for
# it, which the channel never had to drop: tokenwire demo measured 49 token
# frames in its shrunk socket buffers (4 KiB asked each way) and delivered 75
# tokens under drop-newest where memory delivers 28.
DEMO_KERNEL_TOKENS = 48
# Starting the server, five connects and laying the report out: the demo
# took 5.17 s of wall clock for 4.8 s of connections.
DEMO_OVERHEAD_S = 0.3


def plan(params: ReportParams, clock: str | None = None) -> dict[str, RunSpec]:
    """Return the runs the page needs, by name, on ``clock`` (default: the params' clock)."""
    slow = RunSpec(tokens=params.tokens, policy=Policy.BLOCK, capacity=params.buffer, reader_ms=params.reader_ms,
                   producer_ms=params.producer_ms, seed=params.seed, clock=ClockKind(clock or params.clock))
    specs = {"baseline": replace(slow, capacity=BASELINE_BUFFER, reader_ms=0.0, stream_id="baseline")}
    for policy in POLICIES:
        specs[policy] = replace(slow, policy=Policy(policy), stream_id=policy)
    for mode in OnDisconnect:
        specs[mode.value] = replace(slow, hang_up_after=params.cut_after, on_disconnect=mode, stream_id="resume")
    return specs


def plan_demo(params: ReportParams = DEMO_PARAMS, clock: str | None = None) -> dict[str, RunSpec]:
    """Return the runs ``tokenwire demo`` makes over sockets: the page's plan, ``DEMO_RUNS`` only."""
    specs = plan(params, clock)
    return {name: specs[name] for name in DEMO_RUNS}


def estimate_wall_ms(spec: RunSpec, kernel_tokens: int = 0) -> float:
    """Return about how long ``spec`` takes, in ms, without running it.

    The slower side sets the pace: the producer makes every token at its
    step, the reader takes each token it gets at ``reader_ms``.  Under a
    lossy policy the reader gets what the buffer held plus what it took
    while the producer ran, plus ``kernel_tokens`` a socket's buffers held
    for it; a hang-up adds one retry.
    """
    timing = spec.timing()
    ttft_ms, step_ms = timing.ttft_ns / 1e6, timing.step_ns / 1e6
    made_ms = ttft_ms + spec.tokens * step_ms
    taken = float(spec.tokens)
    if spec.policy in LOSSY and spec.reader_ms > step_ms:
        taken = min(taken, spec.capacity + kernel_tokens + made_ms / spec.reader_ms)
    retry_ms = spec.retry_ms if spec.hang_up_after is not None else 0
    return max(made_ms, ttft_ms + taken * spec.reader_ms) + retry_ms


def demo_estimate_s(params: ReportParams = DEMO_PARAMS) -> float:
    """Return about how long ``tokenwire demo`` takes for ``params``, in seconds to 1 decimal.

    Its runs over sockets (``estimate_wall_ms`` with ``DEMO_KERNEL_TOKENS``) and ``DEMO_OVERHEAD_S``.
    """
    runs_ms = sum(estimate_wall_ms(spec, DEMO_KERNEL_TOKENS) for spec in plan_demo(params).values())
    return round(runs_ms / 1000 + DEMO_OVERHEAD_S, 1)


def _connections(specs: Mapping[str, RunSpec]) -> int:
    """Connections the runs open: one each, and one more after each hang-up."""
    return sum(1 + (spec.hang_up_after is not None) for spec in specs.values())


# What the trim note quotes about the demo, computed once, not per page;
# the names a run given to ``report.assemble`` may have.
DEMO_CONNECTIONS, DEMO_ESTIMATE_S = _connections(plan_demo()), demo_estimate_s()
RUN_NAMES = frozenset(plan(DEMO_PARAMS))


def virtual_wall_ms(params: ReportParams) -> float:
    """Return the wall time the page's runs take on the virtual clock, in ms.

    A real-clock page takes about this long, so it is the estimate a
    ``clock=real`` request is judged by before anything runs in real time.
    """
    return sum(run(spec).wall_ns for spec in plan(params, "virtual").values()) / 1e6


def run_spec(spec: RunSpec) -> RunResult:
    """Run one of the plan's specs: on the virtual clock, or in real time on a private event loop."""
    if spec.clock is ClockKind.REAL:
        from ..realtime import LoopDriver  # asyncio only when a real-clock run is asked for
        return run(spec, LoopDriver.private())
    return run(spec)
