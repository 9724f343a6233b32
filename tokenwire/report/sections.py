"""The report's sections 1 to 4: one record each, computed from the core's runs.

How this works: ``wire_of`` (section 1) and ``timing_of`` (section 2) read
the baseline run, ``row_of`` one policy's run (section 3), ``resume_of`` a
hang-up-and-resume run against the uninterrupted ``block`` run (section 4),
and ``detail_of`` the run the chosen scenario traces (``DETAIL_RUN``).
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
from dataclasses import dataclass

from ..core.clock import ms_to_ns
from ..core.metrics import timing_from_arrivals
from ..core.model import ANSWER
from ..core.pipeline import RunResult

__all__ = [
    "DETAIL_RUN",
    "TRACE_MAX_ROWS",
    "Detail",
    "PolicyRow",
    "Resume",
    "Timing",
    "TraceRow",
    "Wire",
    "detail_of",
    "resume_of",
    "row_of",
    "timing_of",
    "wire_of",
]

# Token frames shown in full at the top of section 1 (then "..." and done).
SHOWN_TOKEN_FRAMES = 3
# Ids shown at each end of "event ids received".
IDS_SHOWN = 4
# The detail block's trace: first rows, last rows, rows either side of a
# change of decision, and a hard cap so that it stays readable.
TRACE_HEAD, TRACE_TAIL, TRACE_CONTEXT, TRACE_MAX_ROWS = 4, 3, 1, 22
# What the detail table calls each channel decision, and what it means: the
# core's own words ("evicted") read as if the token shown had been evicted.
DECISIONS = {
    "accepted": ("queued", "the token went into the buffer"),
    "evicted": ("queued, evicted oldest", "the token went in and the oldest queued token was thrown away to make "
                                          "room (drop-oldest)"),
    "dropped": ("discarded, buffer full", "this token was thrown away because the buffer was full (drop-newest)"),
    "cut": ("cut the reader off", "the buffer was full, so the reader was disconnected; the token waits in the "
                                  "log for the resume"),
    "closed": ("not queued, reader gone", "the reader had hung up; the token is in the log and the resume "
                                          "replays it"),
}
# Which run each scenario's detail block traces, and the section it goes in.
DETAIL_RUN = {"baseline": ("baseline", 2), "block": ("block", 3), "drop-newest": ("drop-newest", 3),
              "drop-oldest": ("drop-oldest", 3), "disconnect": ("cancel", 4)}


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

    @property
    def label(self) -> str:
        """The decision as the table shows it (``DECISIONS``), the core's word if it has none."""
        return DECISIONS.get(self.decision, (self.decision, ""))[0]


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

    @property
    def legend(self) -> tuple[tuple[str, str], ...]:
        """``(label, meaning)`` of each decision the shown rows hold, in ``DECISIONS`` order."""
        present = {row.decision for row in self.rows if row is not None}
        return tuple(DECISIONS[d] for d in DECISIONS if d in present) + tuple(
            (d, "the channel's own word") for d in sorted(present - DECISIONS.keys()))


# ------------------------------------------------------------ sections 1 to 4


def wire_of(result: RunResult) -> Wire:
    """Return section 1 for the baseline run ``result``."""
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


def timing_of(result: RunResult) -> Timing:
    """Return section 2 for the baseline run ``result``."""
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


def row_of(result: RunResult) -> PolicyRow:
    """Return section 3's row for one policy's run ``result``."""
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


def resume_of(result: RunResult, reference_text: str) -> Resume:
    """Return section 4 for a hang-up-and-resume run, checked against the uninterrupted ``reference_text``."""
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


def detail_of(scenario: str, runs: Mapping[str, RunResult]) -> Detail:
    """Return the detail block of ``scenario``, tracing its run in ``runs`` (``DETAIL_RUN``); raises ``KeyError``."""
    name, section = DETAIL_RUN[scenario]
    result = runs[name]
    read_at = dict(zip(result.ids, result.arrivals_ns, strict=True))
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
    """The answer in runs: ``(text, 0)`` as the reader got it, ``(text, n)`` for each run of ``n`` in ``lost``."""
    received = dict(zip(result.ids, result.texts, strict=True))
    pieces: list[tuple[str, int]] = []
    at = 0
    for first, count in (*lost, (result.spec.tokens, 0)):
        if first > at:
            pieces.append(("".join([received[i] for i in range(at, first)]), 0))
        if count:
            pieces.append(("".join(ANSWER[first:first + count]), count))
        at = first + count
    return tuple(pieces)
