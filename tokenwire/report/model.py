"""The report model: one frozen record per page, built by running the core.

How this works: ``build_report(params)`` runs each run of ``plan(params)``
(``plan``) exactly once, on the visitor's clock, and
``assemble(params, runs)`` lays the runs out as the record: sections 1 to 4
are computed by ``sections``, section 5 (the kernel's buffers) is
given by whoever measured the runs over sockets (``transport``).

``tokenwire demo`` makes part of the same plan (``plan_demo``) over loopback
sockets on the real clock and hands its runs to ``assemble(...,
transport="sockets", sockets=...)``: the absent runs' rows and lines are left
out, there is no chosen scenario (no detail block), and section 5 is filled
in.  Each figure is computed once, so the text, JSON and HTML renderings
(``render``) cannot disagree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ..core.model import ANSWER, QUESTION
from ..core.pipeline import RunResult
from .params import ReportParams
from .plan import DEMO_CONNECTIONS, DEMO_ESTIMATE_S, DEMO_PARAMS, POLICIES, RUN_NAMES, plan, run_spec
from .sections import (
    DETAIL_RUN,
    Detail,
    PolicyRow,
    Resume,
    Timing,
    Wire,
    detail_of,
    resume_of,
    row_of,
    timing_of,
    wire_of,
)
from .transport import TRANSPORTS, Sockets, Transport

__all__ = ["Report", "assemble", "build_report"]

# Runs every report needs (sections 1, 2, 4 and the uninterrupted reference);
# the others' rows and lines are left out when they are absent.
REQUIRED_RUNS = ("baseline", "block", "cancel")


@dataclass(frozen=True, slots=True)
class Report:
    """Everything the page shows, computed once; ``runs`` keeps the raw runs for the charts.

    transport: ``memory`` (the page) or ``sockets`` (``tokenwire demo``);
    detach and detail are None and ``buffer`` lacks the policies whose runs
    were absent (see ``assemble``); sockets is section 5, sockets only.
    demo_*: the demo's plan, quoted in the page's trim note.
    """

    params: ReportParams
    transport: Transport
    question: str
    answer_tokens: int
    demo_tokens: int
    demo_reader_ms: float
    demo_buffer: int
    demo_repeats: int
    demo_estimate_s: float
    retry_ms: int
    wire: Wire
    timing: Timing
    buffer: tuple[PolicyRow, ...]
    resume: Resume
    detach: Resume | None
    detail: Detail | None
    sockets: Sockets | None
    runs: Mapping[str, RunResult]

    @property
    def trimmed(self) -> bool:
        """True when the page runs fewer tokens than the full answer."""
        return self.params.tokens < self.answer_tokens

    @property
    def absent_policies(self) -> tuple[str, ...]:
        """The policies whose runs were not given, so section 3 has no row for them."""
        present = {row.policy for row in self.buffer}
        return tuple(p for p in POLICIES if p not in present)

    @property
    def same_loss(self) -> bool:
        """True when drop-newest and drop-oldest both ran and lost the same number of tokens (more than none)."""
        present = {row.policy: row.dropped for row in self.buffer}
        return present.get("drop-newest", 0) == present.get("drop-oldest", -1) > 0

    def row(self, policy: str) -> PolicyRow:
        """Return section 3's row for ``policy``; raises ``KeyError``."""
        for row in self.buffer:
            if row.policy == policy:
                return row
        raise KeyError(policy)


def build_report(params: ReportParams) -> Report:
    """Run the page's runs once each and return the report (``plan``, ``run``, ``assemble``).

    Raises ``ValueError`` only for parameters the core refuses (never for
    parameters ``params`` accepted), ``TimeoutError`` if a
    real-clock run does not finish.
    """
    return assemble(params, {name: run_spec(spec) for name, spec in plan(params).items()})


def assemble(params: ReportParams, runs: Mapping[str, RunResult], *, transport: Transport = "memory",
             sockets: Sockets | None = None) -> Report:
    """Return the report for ``runs``, named as ``plan`` names them, measured over ``transport``.

    ``baseline``, ``block`` and ``cancel`` are required, and under the
    memory transport the run the chosen scenario's detail block traces; the
    other policies and ``detach`` may be absent, and their rows and lines
    are left out.  The sockets transport has no chosen scenario (``detail``
    is None) and needs ``sockets``, section 5; the memory transport refuses
    it.  Raises ``ValueError`` naming a missing or unknown run, a bad
    transport, or ``sockets`` given or missing against the transport.
    """
    _check(params, runs, transport, sockets)
    reference = runs["block"].text
    return Report(
        params=params, transport=transport, question=QUESTION, answer_tokens=len(ANSWER),
        demo_tokens=DEMO_PARAMS.tokens, demo_reader_ms=DEMO_PARAMS.reader_ms, demo_buffer=DEMO_PARAMS.buffer,
        demo_repeats=DEMO_CONNECTIONS, demo_estimate_s=DEMO_ESTIMATE_S, retry_ms=runs["cancel"].spec.retry_ms,
        wire=wire_of(runs["baseline"]), timing=timing_of(runs["baseline"]),
        buffer=tuple(row_of(runs[p]) for p in POLICIES if p in runs),
        resume=resume_of(runs["cancel"], reference),
        detach=resume_of(runs["detach"], reference) if "detach" in runs else None,
        detail=detail_of(params.scenario, runs) if transport == "memory" else None,
        sockets=sockets, runs=MappingProxyType(dict(runs)),
    )


def _check(params: ReportParams, runs: Mapping[str, RunResult], transport: str, sockets: Sockets | None) -> None:
    if transport not in TRANSPORTS:
        raise ValueError(f"transport must be one of {TRANSPORTS!r}, got {transport!r}")
    if (sockets is None) != (transport == "memory"):
        raise ValueError(f"the sockets transport needs sockets (section 5) and the memory transport takes none; "
                         f"got transport={transport!r} with sockets={'None' if sockets is None else 'given'}")
    required = REQUIRED_RUNS + ((DETAIL_RUN[params.scenario][0],) if transport == "memory" else ())
    missing = sorted(set(required) - runs.keys())
    unknown = sorted(runs.keys() - RUN_NAMES)
    if missing or unknown:
        raise ValueError(f"runs must include {sorted(set(required))!r} and name only runs of the plan "
                         f"{sorted(RUN_NAMES)!r}; missing {missing!r}, unknown {unknown!r}")

