"""The report model: one frozen record per page, built by running the core.

How this works: ``plan(params)`` names the runs the page needs,
``build_report(params)`` runs each exactly once, on the visitor's clock, and
``assemble(params, runs)`` lays the runs out as the record:

- ``baseline``: a fast reader (0 ms) under ``block`` with a buffer of 64;
  its frames are section 1 and its arrival times section 2;
- one run per policy (``block``, ``drop-newest``, ``drop-oldest``,
  ``disconnect``) with the visitor's buffer and reader: section 3; the
  ``block`` run is also the uninterrupted reference for section 4;
- ``cancel`` and ``detach``: ``block``, the reader hangs up after
  ``cut_after`` tokens and reconnects with its last event id: section 4.

``tokenwire demo`` makes part of the same plan (``plan_demo``: baseline,
block, drop-newest and cancel) over loopback sockets on the real clock and
hands its runs to ``assemble(..., transport="sockets", sockets=...)``: the
absent runs' rows and lines are left out, there is no chosen scenario (no
detail block), and section 5 (``Sockets``, the kernel's buffers as the demo
measured them) is filled in.  ``demo_estimate_s`` says how long that plan
takes, without running it, for the page's trim note and the demo's banner.

Every figure is computed here, once, and rounded once to the precision the
page prints (ms to 2 decimals for timing, 1 for the buffer and resume
figures), so the text, JSON and HTML renderings cannot disagree.  The
templates only lay these records out.

The resume figures need two instants the core does not record: the reader
hangs up at the arrival of its last token on the first connection, and
reconnects ``retry_ms`` later (that is how ``pipeline._client`` behaves).
"Waited for the model" on the second connection is the sum, over its
tokens, of how much later each arrived than the reader could have taken it
(after the reconnect, and ``reader_ms`` after the previous token).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Literal

from .core.channel import Policy
from .core.clock import ms_to_ns
from .core.metrics import timing_from_arrivals
from .core.model import ANSWER, QUESTION
from .core.pipeline import ClockKind, RunResult, RunSpec, run
from .core.stream import OnDisconnect
from .params import ReportParams

__all__ = [
    "BASELINE_BUFFER",
    "DEMO_PARAMS",
    "DEMO_RUNS",
    "POLICIES",
    "TRANSPORTS",
    "Detail",
    "InMemory",
    "KernelFigures",
    "PolicyRow",
    "Report",
    "Resume",
    "Sockets",
    "Timing",
    "TraceRow",
    "Wire",
    "assemble",
    "build_report",
    "demo_estimate_s",
    "estimate_wall_ms",
    "in_memory",
    "plan",
    "plan_demo",
    "virtual_wall_ms",
]

POLICIES = ("block", "drop-newest", "drop-oldest", "disconnect")
# The baseline's buffer: larger than anything a fast reader lets queue, so
# section 1 and 2 show the protocol with nothing in the way.
BASELINE_BUFFER = 64
# Token frames shown in full at the top of section 1 (then "..." and done).
SHOWN_TOKEN_FRAMES = 3
# Ids shown at each end of "event ids received".
IDS_SHOWN = 4
# The detail block's trace: first rows, last rows, rows either side of a
# change of decision, and a hard cap so that it stays readable.
TRACE_HEAD, TRACE_TAIL, TRACE_CONTEXT, TRACE_MAX_ROWS = 4, 3, 1, 22

Transport = Literal["memory", "sockets"]
TRANSPORTS: tuple[Transport, ...] = ("memory", "sockets")
# Runs every report needs (sections 1, 2, 4 and the uninterrupted reference);
# the others' rows and lines are left out when they are absent.
REQUIRED_RUNS = ("baseline", "block", "cancel")
# ``tokenwire demo``'s defaults: the full answer, a 6 ms reader against a
# 4-slot buffer, on the real clock; its runs are these names of the plan.
DEMO_PARAMS = ReportParams(clock="real", tokens=len(ANSWER), buffer=4, reader_ms=6.0, producer_ms=0.5,
                           cut_after=18, seed=1)
DEMO_RUNS = ("baseline", "block", "drop-newest", "cancel")
LOSSY = (Policy.DROP_NEWEST, Policy.DROP_OLDEST)


@dataclass(frozen=True, slots=True)
class Wire:
    """Section 1: the baseline's frames as text and what the decoder made of them.

    shown: the open frame and the first token frames, exactly as sent;
    skipped: frames left out before ``closing`` (the done frame);
    frames_read/token_frames: events the reader's decoder (the project's
    own) read from all the bytes, and how many were tokens; round_trip: the
    decoded token texts equal the answer's tokens; spaced_token: the first
    shown token that carries a leading space (its frame reads
    ``data:  word``), if any.
    """

    shown: tuple[str, ...]
    skipped: int
    closing: str
    frames_read: int
    token_frames: int
    round_trip: bool
    spaced_token: str | None

    @property
    def first_frames(self) -> str:
        """The shown frames as one string, exactly the bytes sent."""
        return "".join(self.shown)


@dataclass(frozen=True, slots=True)
class Timing:
    """Section 2, the fast reader: ms to 2 decimals, share to 3, throughput whole.

    first_token_percent is ``first_token_share`` in percent (1 decimal).
    """

    tokens: int
    ttft_ms: float
    total_ms: float
    first_token_share: float
    first_token_percent: float
    itl_p50_ms: float | None     # None: a single token has no gap between tokens
    itl_p95_ms: float | None
    itl_max_ms: float | None
    tokens_per_s: int


@dataclass(frozen=True, slots=True)
class PolicyRow:
    """Section 3, one policy under the slow reader (ms to 1 decimal).

    delivered: tokens the reader got (ids at the reader); lost: the runs of
    missing indices as ``(first, count)``; cuts: times the ``disconnect``
    policy cut the reader off; reconnects: connections after the first;
    pieces: the answer in runs, ``(text, 0)`` for text the reader got and
    ``(text, n)`` for ``n`` lost tokens, so a page can show the holes.
    """

    policy: str
    total: int
    delivered: int
    dropped: int
    gap_runs: int
    high_water: int
    capacity: int
    producer_waited_ms: float
    pauses: int
    wall_ms: float
    cuts: int
    reconnects: int
    lost: tuple[tuple[int, int], ...]
    pieces: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class Resume:
    """Section 4, one hang-up and resume (``mode`` is cancel or detach).

    generated_at_hang_up / generated_at_reconnect: tokens in the log when
    the reader left and when it came back (under cancel, the second is
    where the producer stopped); replayed: tokens the second connection got
    from the log; waited_for_model_ms: see the module docstring;
    catch_up_ms: reconnect to the last token; generated_total: model steps
    over both connections; steps_max: most steps any one index took.
    """

    mode: str
    total: int
    first_tokens: int
    last_event_id: str
    first_completed: bool
    generated_at_hang_up: int
    generated_at_reconnect: int
    resumed_at: int
    second_tokens: int
    completed: bool
    replayed: int
    ids_head: tuple[int, ...]
    ids_tail: tuple[int, ...]
    contiguous: bool
    duplicates: tuple[int, ...]
    text_matches: bool
    generated_total: int
    steps_max: int
    hang_up_ms: float
    reconnect_ms: float
    waited_for_model_ms: float
    catch_up_ms: float

    @property
    def last_index(self) -> int:
        """The answer's last index."""
        return self.total - 1

    @property
    def generated_once(self) -> bool:
        """Every index of the answer was generated exactly once."""
        return self.steps_max == 1 and self.generated_total == self.total

    @property
    def last_event_id_shown(self) -> str:
        """The last event id as the page shows it ("none" before any token)."""
        return self.last_event_id or "none"

    @property
    def sent_header(self) -> str:
        """What the reconnect sent: the header, or that it had nothing to send."""
        if self.last_event_id:
            return f"Last-Event-ID: {self.last_event_id}"
        return "no Last-Event-ID (nothing was received, so it starts over at 0)"

    @property
    def generated_while_away(self) -> int:
        """Tokens generated while nobody was reading."""
        return self.generated_at_reconnect - self.generated_at_hang_up


@dataclass(frozen=True, slots=True)
class TraceRow:
    """One producer decision: when, which index, what the channel did, depth after, wait before, read when."""

    t_ms: float
    index: int
    decision: str
    depth: int
    waited_ms: float
    read_ms: float | None


@dataclass(frozen=True, slots=True)
class Detail:
    """The chosen scenario's detail block.

    section: where it goes (2, 3 or 4); run: which run it traces; rows:
    trace rows, ``None`` where rows were left out; decisions: how many
    producer decisions the run made in all; pieces: the answer as the
    reader got it, ``(text, None)`` for a received token and ``("", n)``
    for a hole of ``n`` lost tokens (drop scenarios only, else empty).
    """

    scenario: str
    section: int
    run: str
    rows: tuple[TraceRow | None, ...]
    decisions: int

    @property
    def shown(self) -> int:
        """How many trace rows are shown."""
        return sum(row is not None for row in self.rows)


@dataclass(frozen=True, slots=True)
class KernelFigures:
    """Section 5, one connection over sockets: what sat in kernel buffers, sampled at every token the reader took.

    sndbuf/rcvbuf: effective ``SO_SNDBUF`` of the server's socket and
    ``SO_RCVBUF`` of the reader's (as the kernel reports them, after it
    doubled the request); send_queue_max: deepest ``TIOCOUTQ`` on the
    server's socket; recv_queue_max: deepest ``FIONREAD`` on the reader's;
    in_kernel_bytes_max: most bytes the server had handed to the kernel that
    the reader had not yet read; in_kernel_tokens_max: the same in whole
    token frames; reader_held_max: token frames the reader had pulled out of
    the kernel but not yet taken; channel_depth_max: deepest channel seen at
    the same instants; samples: how many instants; channel_high_water and
    channel_capacity: the connection's channel, as the server logged it.
    """

    sndbuf: int
    rcvbuf: int
    send_queue_max: int
    recv_queue_max: int
    in_kernel_bytes_max: int
    in_kernel_tokens_max: int
    reader_held_max: int
    channel_depth_max: int
    samples: int
    channel_high_water: int
    channel_capacity: int


@dataclass(frozen=True, slots=True)
class InMemory:
    """The demo's plan run in memory on the virtual clock, where the channel is the only queue (see ``in_memory``)."""

    drop_delivered: int
    block_wall_ms: float
    generated_at_reconnect: int


@dataclass(frozen=True, slots=True)
class Sockets:
    """Section 5, present for the sockets transport only: the kernel's buffers as the demo measured them.

    sndbuf_asked/rcvbuf_asked: bytes asked for (None: the kernel's own
    sizes); recv_chunk: most bytes the reader takes out of the kernel at
    once; connections: by name, in the order they ran; sent_when_noticed:
    token frames the server had sent when a failed write told it the reader
    had hung up; kernel_defaults: the machine's ``(tcp_rmem, tcp_wmem)``
    starting sizes, None if unreadable; answer_bytes: the whole answer's
    frames; in_memory: the same plan in memory; wall_s: all connections.
    """

    sndbuf_asked: int | None
    rcvbuf_asked: int | None
    recv_chunk: int
    connections: Mapping[str, KernelFigures]
    sent_when_noticed: int
    kernel_defaults: tuple[int, int] | None
    answer_bytes: int
    in_memory: InMemory
    wall_s: float

    @property
    def granted(self) -> KernelFigures:
        """The first connection's figures, whose buffer sizes the kernel granted."""
        return next(iter(self.connections.values()))


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

    def row(self, policy: str) -> PolicyRow:
        """Return section 3's row for ``policy``; raises ``KeyError``."""
        for row in self.buffer:
            if row.policy == policy:
                return row
        raise KeyError(policy)


# ------------------------------------------------------------ the runs


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


def estimate_wall_ms(spec: RunSpec) -> float:
    """Return about how long ``spec`` takes, in ms, without running it.

    The slower side sets the pace: the producer makes every token at its
    step, the reader takes each token it gets at ``reader_ms``.  Under a
    lossy policy the reader gets what the buffer held plus what it took
    while the producer ran; a hang-up adds one retry.  Kernel buffers are not
    modelled: over sockets a lossy reader gets more, so it takes longer.
    """
    timing = spec.timing()
    ttft_ms, step_ms = timing.ttft_ns / 1e6, timing.step_ns / 1e6
    made_ms = ttft_ms + spec.tokens * step_ms
    taken = float(spec.tokens)
    if spec.policy in LOSSY and spec.reader_ms > step_ms:
        taken = min(taken, spec.capacity + made_ms / spec.reader_ms)
    retry_ms = spec.retry_ms if spec.hang_up_after is not None else 0
    return max(made_ms, ttft_ms + taken * spec.reader_ms) + retry_ms


def demo_estimate_s(params: ReportParams = DEMO_PARAMS) -> float:
    """Return about how long the demo's runs take for ``params``, in seconds to 1 decimal (``estimate_wall_ms``)."""
    return round(sum(estimate_wall_ms(spec) for spec in plan_demo(params).values()) / 1000, 1)


def _connections(specs: Mapping[str, RunSpec]) -> int:
    """Connections the runs open: one each, and one more after each hang-up."""
    return sum(1 + (spec.hang_up_after is not None) for spec in specs.values())


# What the trim note quotes about the demo, computed once, not per page;
# the names a run given to ``assemble`` may have.
_DEMO_CONNECTIONS, _DEMO_ESTIMATE_S = _connections(plan_demo()), demo_estimate_s()
_RUN_NAMES = frozenset(plan(DEMO_PARAMS))


def virtual_wall_ms(params: ReportParams) -> float:
    """Return the wall time the page's runs take on the virtual clock, in ms.

    A real-clock page takes about this long, so it is the estimate a
    ``clock=real`` request is judged by before anything runs on threads.
    """
    return sum(run(spec).wall_ns for spec in plan(params, "virtual").values()) / 1e6


def in_memory(params: ReportParams) -> InMemory:
    """Run the demo's block, drop-newest and cancel runs for ``params`` on the virtual clock; returns their figures."""
    specs = plan_demo(params, "virtual")
    block, drop, cancel = (run(specs[name]) for name in ("block", "drop-newest", "cancel"))
    return InMemory(drop_delivered=len(drop.ids), block_wall_ms=_policy_row(block).wall_ms,
                    generated_at_reconnect=_resume(cancel, block.text).generated_at_reconnect)


def build_report(params: ReportParams) -> Report:
    """Run the page's runs once each and return the report (``plan``, ``run``, ``assemble``).

    Raises ``ValueError`` only for parameters the core refuses (never for
    parameters ``tokenwire.params`` accepted), ``TimeoutError`` if a
    real-clock run does not finish.
    """
    return assemble(params, {name: run(spec) for name, spec in plan(params).items()})


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
        demo_repeats=_DEMO_CONNECTIONS, demo_estimate_s=_DEMO_ESTIMATE_S, retry_ms=runs["cancel"].spec.retry_ms,
        wire=_wire(runs["baseline"]), timing=_timing(runs["baseline"]),
        buffer=tuple(_policy_row(runs[p]) for p in POLICIES if p in runs),
        resume=_resume(runs["cancel"], reference),
        detach=_resume(runs["detach"], reference) if "detach" in runs else None,
        detail=_detail(params.scenario, runs) if transport == "memory" else None,
        sockets=sockets, runs=MappingProxyType(dict(runs)),
    )


def _check(params: ReportParams, runs: Mapping[str, RunResult], transport: str, sockets: Sockets | None) -> None:
    if transport not in TRANSPORTS:
        raise ValueError(f"transport must be one of {TRANSPORTS!r}, got {transport!r}")
    if (sockets is None) != (transport == "memory"):
        raise ValueError(f"the sockets transport needs sockets (section 5) and the memory transport takes none; "
                         f"got transport={transport!r} with sockets={'None' if sockets is None else 'given'}")
    required = REQUIRED_RUNS + ((_DETAIL_RUN[params.scenario][0],) if transport == "memory" else ())
    missing = sorted(set(required) - runs.keys())
    unknown = sorted(runs.keys() - _RUN_NAMES)
    if missing or unknown:
        raise ValueError(f"runs must include {sorted(set(required))!r} and name only runs of the plan "
                         f"{sorted(_RUN_NAMES)!r}; missing {missing!r}, unknown {unknown!r}")


# ------------------------------------------------------------ sections


def _wire(result: RunResult) -> Wire:
    frames = result.frames[0]
    shown = frames[: 1 + SHOWN_TOKEN_FRAMES]
    if len(shown) == len(frames):      # a very short answer: the done frame is shown as the closing one
        shown = shown[:-1]
    token_texts = result.texts        # the reader decoded every frame with the project's Decoder as it arrived
    return Wire(
        shown=tuple(f.decode() for f in shown), skipped=len(frames) - len(shown) - 1,
        closing=frames[-1].decode(), frames_read=result.events_read, token_frames=len(token_texts),
        round_trip=token_texts == ANSWER[: result.spec.tokens],
        spaced_token=next((t for t in token_texts[:SHOWN_TOKEN_FRAMES] if t.startswith(" ")), None),
    )


def _timing(result: RunResult) -> Timing:
    t = timing_from_arrivals(result.arrivals_ns)

    def ms(value: float | None) -> float | None:
        return None if value is None else round(value, 2)

    return Timing(
        tokens=t.tokens, ttft_ms=round(t.ttft_ms, 2), total_ms=round(t.total_ms, 2),
        first_token_share=round(t.first_token_share, 3), first_token_percent=round(100 * t.first_token_share, 1),
        itl_p50_ms=ms(t.itl_p50_ms), itl_p95_ms=ms(t.itl_p95_ms), itl_max_ms=ms(t.itl_max_ms),
        tokens_per_s=round(t.tokens_per_s),
    )


def _runs_of_missing(ids: Sequence[int], total: int) -> tuple[tuple[int, int], ...]:
    got = set(ids)
    runs: list[tuple[int, int]] = []
    for index in range(total):
        if index in got:
            continue
        if runs and runs[-1][0] + runs[-1][1] == index:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((index, 1))
    return tuple(runs)


def _policy_row(result: RunResult) -> PolicyRow:
    s, lost = result.stats, _runs_of_missing(result.ids, result.spec.tokens)
    return PolicyRow(
        policy=result.spec.policy.value, total=result.spec.tokens, delivered=len(result.ids),
        dropped=s.dropped, gap_runs=s.gap_runs, high_water=s.high_water, capacity=s.capacity,
        producer_waited_ms=round(s.waited_ns / 1e6, 1), pauses=s.pauses, wall_ms=round(result.wall_ns / 1e6, 1),
        cuts=s.cuts, reconnects=len(result.connections) - 1, lost=lost, pieces=_pieces(result, lost),
    )


def _generated_by(result: RunResult, t_ns: int) -> int:
    """Tokens the producer had generated and offered by ``t_ns`` (one trace decision each)."""
    return len({e.index for e in result.trace if e.decision != "taken" and e.t_ns <= t_ns})


def _waited_for_model(arrivals: Sequence[int], hang_ns: int, reconnect_ns: int, reader_ns: int) -> int:
    earliest, waited = max(reconnect_ns, hang_ns + reader_ns), 0
    for t in arrivals:
        waited += max(0, t - earliest)
        earliest = t + reader_ns
    return waited


def _resume(result: RunResult, reference_text: str) -> Resume:
    first, second = result.connections[0], result.connections[1]
    k, total, ids = first.tokens, result.spec.tokens, result.ids
    hang_ns = result.hung_up_ns if result.hung_up_ns is not None else result.arrivals_ns[k - 1]
    reconnect_ns = hang_ns + ms_to_ns(result.spec.retry_ms)
    later = result.arrivals_ns[k:]
    waited = _waited_for_model(later, hang_ns, reconnect_ns, ms_to_ns(result.spec.reader_ms))
    counts = Counter(ids)
    at_reconnect = first.generated_before_next if first.generated_before_next is not None else total
    return Resume(
        mode=result.spec.on_disconnect.value, total=total, first_tokens=k, last_event_id=first.last_event_id,
        first_completed=first.ending.value == "done", generated_at_hang_up=_generated_by(result, hang_ns),
        generated_at_reconnect=at_reconnect, resumed_at=second.start_index,
        second_tokens=sum(c.tokens for c in result.connections[1:]),
        completed=result.connections[-1].ending.value == "done", replayed=at_reconnect - second.start_index,
        ids_head=ids[:IDS_SHOWN], ids_tail=ids[-IDS_SHOWN:], contiguous=ids == tuple(range(total)),
        duplicates=tuple(sorted(i for i, n in counts.items() if n > 1)),
        text_matches=result.text == reference_text, generated_total=result.generated_total,
        steps_max=max(result.steps.values(), default=0),
        hang_up_ms=round(hang_ns / 1e6, 1), reconnect_ms=round(reconnect_ns / 1e6, 1),
        waited_for_model_ms=round(waited / 1e6, 1),
        catch_up_ms=round(((later[-1] if later else reconnect_ns) - reconnect_ns) / 1e6, 1),
    )


# ------------------------------------------------------------ the detail block

_DETAIL_RUN = {"baseline": ("baseline", 2), "block": ("block", 3), "drop-newest": ("drop-newest", 3),
               "drop-oldest": ("drop-oldest", 3), "disconnect": ("cancel", 4)}


def _detail(scenario: str, runs: Mapping[str, RunResult]) -> Detail:
    name, section = _DETAIL_RUN[scenario]
    result = runs[name]
    read_at = dict(zip(result.ids, result.arrivals_ns))
    decisions = [e for e in result.trace if e.decision != "taken"]
    rows = tuple(
        None if i is None else TraceRow(
            t_ms=round(decisions[i].t_ns / 1e6, 2), index=decisions[i].index, decision=decisions[i].decision,
            depth=decisions[i].depth, waited_ms=round(decisions[i].waited_ns / 1e6, 2),
            read_ms=round(read_at[decisions[i].index] / 1e6, 2) if decisions[i].index in read_at else None)
        for i in _pick_rows([(e.decision, e.waited_ns > 0) for e in decisions])
    )
    return Detail(scenario=scenario, section=section, run=name, rows=rows, decisions=len(decisions))


def _pick_rows(kinds: Sequence[object]) -> list[int | None]:
    """Return row positions to show (``None`` marks a gap): head, tail, and each change of kind with context."""
    n = len(kinds)
    keep = set(range(min(TRACE_HEAD, n))) | set(range(max(0, n - TRACE_TAIL), n))
    for i in range(1, n):
        if kinds[i] != kinds[i - 1]:
            around = set(range(max(0, i - TRACE_CONTEXT), min(n, i + TRACE_CONTEXT + 1)))
            if len(keep | around) > TRACE_MAX_ROWS:
                break
            keep |= around
    out: list[int | None] = []
    for i in sorted(keep):
        if out and out[-1] is not None and out[-1] != i - 1:
            out.append(None)
        out.append(i)
    return out


def _pieces(result: RunResult, lost: Sequence[tuple[int, int]]) -> tuple[tuple[str, int], ...]:
    """The answer in runs: ``(text, 0)`` as the reader got it, ``(text, n)`` for the ``n`` tokens of each run in ``lost``."""
    received = dict(zip(result.ids, result.texts))
    pieces: list[tuple[str, int]] = []
    at = 0
    for first, count in (*lost, (result.spec.tokens, 0)):
        if first > at:
            pieces.append(("".join([received[i] for i in range(at, first)]), 0))
        if count:
            pieces.append(("".join(ANSWER[first:first + count]), count))
        at = first + count
    return tuple(pieces)
