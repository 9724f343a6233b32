"""The HTML page's SVG charts, laid out server-side so the page needs no script.

How this works: ``charts(report)`` computes every chart's geometry; the
template only places it.  A chart is an outer ``<svg>`` as wide as its box
(no viewBox, so its text keeps its CSS size at any width) holding an inner
``<svg viewBox="0 0 1000 1000" preserveAspectRatio="none">`` for the data:
lines and shaded spans are in those units (``SPAN``), tick and marker labels
in percent of the width, so a phone and a desktop draw the same chart with
the same 12 px text.  No label sits on the data: the y ticks stand in a
gutter left of the plot (``.chart > svg``'s margin, in the CSS), the axis
titles on rows of their own above and below it, and the markers' labels on
rows above the plot, each row holding labels that do not overlap at the
narrowest plot (``_placed``: a label's width is estimated, generously, at
``MIN_PLOT_PX``; a wider plot only shrinks each label's share of it, so
what fits there fits everywhere).  Series too dense for their pixels (a depth that
flips between 3 and 4 every token) are drawn as a band: per column of the
chart, the least and the most the series reached there.  Every chart
carries its data as a table (``Table``), the text alternative the page
shows under it.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from ..core.pipeline import RunResult
from .model import Report
from .plan import POLICIES
from .templating import num, plural

__all__ = ["Chart", "Line", "Mark", "Table", "charts"]

SPAN = 1000           # the inner plot's units, both ways
BAND_COLUMNS = 200    # columns a band is aggregated into: about one per 2-5 px of a chart's width
SAMPLES = 8           # rows of a line chart's data table
# The narrowest plot the labels are laid out for: a 360 px phone, less the page's margins and the tick gutter.
MIN_PLOT_PX = 290
CHAR_PX = 7.2         # a generous width of one character of the 12 px chart text (system-ui's digits are ~6.7)
LABEL_GAP = 0.8       # percent of the width between a marker and its label, and between two labels
TITLE_ROW = 12        # baseline of the y axis title, px from the chart's top
ROW_PX = 14           # one row of marker labels
PLOT_TOP = 22         # where the plot starts below the title when no marker labels


@dataclass(frozen=True, slots=True)
class Line:
    """One series: CSS class, legend label, SVG points in plot units; ``band``: a filled min-max polygon."""

    css: str
    label: str
    points: str
    band: bool = False


@dataclass(frozen=True, slots=True)
class Mark:
    """A vertical line (``shade`` 0) or a shaded span at ``x`` (plot units), labelled at ``pos`` percent.

    ``at``: the percent the label starts from (its line, or its span's start); ``_placed`` sets ``pos``,
    ``anchor`` and ``row`` (0: the row just under the title).
    """

    x: float
    shade: float
    label: str
    at: float
    pos: float = 0.0
    anchor: str = "start"
    row: int = 0

    @property
    def label_y(self) -> int:
        return TITLE_ROW + ROW_PX * (self.row + 1)


@dataclass(frozen=True, slots=True)
class Table:
    """The chart's data as a table: caption, column heads, rows of cells."""

    caption: str
    head: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True, slots=True)
class Chart:
    """Everything one chart needs: ticks as ``(percent or px, label)``; the template only places it."""

    title: str
    height: int
    x_label: str
    y_label: str
    x_ticks: tuple[tuple[float, str, str], ...]      # (percent, label, text-anchor)
    y_ticks: tuple[tuple[float, float, str], ...]    # (plot units, label's baseline px in the outer svg, label)
    lines: tuple[Line, ...]
    marks: tuple[Mark, ...]
    table: Table

    @property
    def top(self) -> int:
        """The plot's top: under the title and the rows of marker labels."""
        return _top(self.marks)

    @property
    def plot_height(self) -> int:
        return self.height - self.top - 34

    @property
    def tick_y(self) -> int:
        return self.top + self.plot_height + 15

    @property
    def x_label_y(self) -> int:
        return self.top + self.plot_height + 30


def _nice_step(span: float, count: int) -> float:
    """Return a 1, 2, 2.5 or 5 times a power of ten step giving about ``count`` ticks over ``span``."""
    raw = max(span, 1e-9) / count
    magnitude = 10.0 ** math.floor(math.log10(raw))
    return next(f * magnitude for f in (1, 2, 2.5, 5, 10) if f * magnitude >= raw * (1 - 1e-9))


def _ticks(low: float, high: float, count: int) -> list[float]:
    """Nice ticks from the last one at or below ``low`` to the first one at or above ``high``."""
    step = _nice_step(high - low, count)
    return [i * step for i in range(math.floor(low / step + 1e-9), math.ceil(high / step - 1e-9) + 1)]


class _Axes:
    """A linear map from data to plot units, with ticks, over ``[x_low, x_high] x [0, y_high]``."""

    def __init__(self, x_low: float, x_high: float, y_high: float, x_count: int = 5, y_count: int = 4) -> None:
        self.xs = _ticks(x_low, max(x_high, x_low + 1e-6), x_count)
        self.ys = _ticks(0.0, y_high or 1.0, y_count)
        self.x0, self.x1 = min(self.xs[0], x_low), max(self.xs[-1], x_high)
        self.y1 = max(self.ys[-1], y_high)

    def x(self, value: float) -> float:
        return round(SPAN * (value - self.x0) / (self.x1 - self.x0), 1)

    def y(self, value: float) -> float:
        return round(SPAN - SPAN * value / self.y1, 1)

    def pos(self, value: float) -> float:
        """Where ``value`` falls, in percent of the width."""
        return round(100 * (value - self.x0) / (self.x1 - self.x0), 2)

    def points(self, pts: Sequence[tuple[float, float]]) -> str:
        return " ".join([f"{self.x(x)},{self.y(y)}" for x, y in pts])

    def band(self, steps: Sequence[tuple[float, float]], end: float) -> str:
        """A min-max polygon of the step function ``steps`` (sorted by time) over ``BAND_COLUMNS`` columns."""
        width = (self.x1 - self.x0) / BAND_COLUMNS
        times = [t for t, _ in steps]
        top, bottom = [], []
        for c in range(BAND_COLUMNS):
            a, b = self.x0 + c * width, min(self.x0 + (c + 1) * width, end)
            if a >= end:
                break
            i = max(0, bisect.bisect_right(times, a) - 1)
            j = bisect.bisect_right(times, b)
            values = [v for _, v in steps[i:max(j, i + 1)]]
            top.append((a, max(values)))
            bottom.append((a, min(values)))
            top.append((b, max(values)))
            bottom.append((b, min(values)))
        return self.points(top + bottom[::-1])

    def chart(self, title: str, plot: int, labels: tuple[str, str], lines: Sequence[Line],
              marks: Sequence[Mark], table: Table) -> Chart:
        """The chart with a plot ``plot`` px tall; the rows its marker labels need are added above it."""
        last = len(self.xs) - 1
        x_ticks = tuple((self.pos(x), num(round(x, 3)), "start" if i == 0 else "end" if i == last else "middle")
                        for i, x in enumerate(self.xs))
        placed = _placed(marks)
        top = _top(placed)
        y_ticks = tuple((self.y(y), round(top + plot * self.y(y) / SPAN + 4, 1), num(round(y, 3))) for y in self.ys)
        return Chart(title=title, height=top + plot + 34, x_label=labels[0], y_label=labels[1], x_ticks=x_ticks,
                     y_ticks=y_ticks, lines=tuple(lines), marks=placed, table=table)

    def mark(self, at: float, label: str, until: float | None = None) -> Mark:
        """A vertical line at ``at`` (or a span to ``until``), labelled from there (``_placed``)."""
        return Mark(x=self.x(at), shade=0.0 if until is None else self.x(until) - self.x(at), label=label,
                    at=self.pos(at))


def _top(marks: Sequence[Mark]) -> int:
    return PLOT_TOP + ROW_PX * (max((m.row for m in marks), default=-1) + 1)


def _placed(marks: Sequence[Mark]) -> tuple[Mark, ...]:
    """Each label right of its line (left where that leaves the plot), on the first row where it overlaps none."""
    rows: list[list[tuple[float, float]]] = []
    placed = []
    for m in marks:
        width = 100 * len(m.label) * CHAR_PX / MIN_PLOT_PX
        start = m.at + LABEL_GAP if m.at + LABEL_GAP + width <= 100 else max(0.0, m.at - LABEL_GAP - width)
        span = (start - LABEL_GAP, start + width + LABEL_GAP)
        row = next((i for i, taken in enumerate(rows) if all(span[1] <= a or b <= span[0] for a, b in taken)),
                   len(rows))
        if row == len(rows):
            rows.append([])
        rows[row].append(span)
        start_anchored = start > m.at
        placed.append(dataclasses.replace(m, pos=round(start if start_anchored else start + width, 2),
                                          anchor="start" if start_anchored else "end", row=row))
    return tuple(placed)


# ---------------------------------------------------------------- data


def _delivered(result: RunResult) -> list[tuple[float, float]]:
    """Tokens the reader had, over time, in ms: a step up at each arrival."""
    points = [(0.0, 0.0)]
    for i, t in enumerate(result.arrivals_ns):
        points += [(t / 1e6, float(i)), (t / 1e6, float(i + 1))]
    return points + [(result.wall_ns / 1e6, float(len(result.arrivals_ns)))]


def _depth(result: RunResult) -> list[tuple[float, float]]:
    """The channel's depth after each decision, in ms (a step function, sorted by time)."""
    steps = [(0.0, 0.0)] + [(e.t_ns / 1e6, float(e.depth)) for e in result.trace]
    return steps + [(result.wall_ns / 1e6, 0.0)]


def _waits(result: RunResult) -> list[tuple[float, float]]:
    """Each time the reader was away: from its last token on a connection to its reconnect ``retry_ms`` later."""
    waits, seen = [], 0
    for conn in result.connections[:-1]:
        seen += conn.tokens
        left = result.arrivals_ns[seen - 1] / 1e6 if seen else 0.0
        if result.hung_up_ns is not None and seen == result.connections[0].tokens:
            left = result.hung_up_ns / 1e6
        waits.append((left, left + result.spec.retry_ms))
    return waits


def _value_at(points: Sequence[tuple[float, float]], t: float) -> float:
    """The last value of ``points`` at or before ``t``."""
    return next((v for x, v in reversed(points) if x <= t), 0.0)


def _sampled(caption: str, x_label: str, named: Sequence[tuple[str, Sequence[tuple[float, float]]]],
             ticks: Sequence[float]) -> Table:
    times = [t for t in ticks if t > 0][:SAMPLES] or [0.0]
    rows = tuple((num(round(t, 3)), *(num(_value_at(pts, t)) for _, pts in named)) for t in times)
    return Table(caption, (x_label, *(name for name, _ in named)), rows)


# ---------------------------------------------------------------- charts


def _arrivals(report: Report) -> Chart:
    p = report.params
    named = [("fast reader", _delivered(report.runs["baseline"])), ("slow reader", _delivered(report.runs["block"]))]
    ax = _Axes(0.0, max(pts[-1][0] for _, pts in named), float(p.tokens))
    lines = [Line("s-fast", "fast reader (0 ms, buffer 64)", ax.points(named[0][1])),
             Line("s-slow", f"slow reader ({num(p.reader_ms)} ms, buffer {p.buffer}, block)", ax.points(named[1][1]))]
    table = _sampled("Tokens read by each reader, at times along the chart", "ms", named, ax.xs)
    return ax.chart("Token arrival: fast reader against slow reader", 184, ("ms since the request", "tokens read"),
                    lines, [], table)


def _gaps(report: Report) -> Chart | None:
    """The distribution of gaps between tokens at the fast reader (a CDF), p50 and p95 marked."""
    t, arrivals = report.timing, report.runs["baseline"].arrivals_ns
    if t.itl_p50_ms is None or t.itl_p95_ms is None or len(arrivals) < 2:
        return None
    gaps = sorted((b - a) / 1e6 for a, b in pairwise(arrivals))
    n = len(gaps)
    steps = [(gaps[0], 0.0)] + [pt for i, g in enumerate(gaps) for pt in ((g, 100 * i / n), (g, 100 * (i + 1) / n))]
    ax = _Axes(gaps[0], gaps[-1], 100.0)
    marks = [ax.mark(t.itl_p50_ms, f"p50 {t.itl_p50_ms:.2f} ms"), ax.mark(t.itl_p95_ms, f"p95 {t.itl_p95_ms:.2f} ms")]
    cuts = statistics.quantiles(gaps, n=4, method="inclusive") if n > 1 else [gaps[0]] * 3
    rows = (("fewest", f"{gaps[0]:.2f}"), ("p25", f"{cuts[0]:.2f}"), ("p50", f"{t.itl_p50_ms:.2f}"),
            ("p75", f"{cuts[2]:.2f}"), ("p95", f"{t.itl_p95_ms:.2f}"), ("most", f"{gaps[-1]:.2f}"))
    table = Table(f"The {plural(n, 'gap')} between tokens, by percentile", ("percentile", "gap ms"), rows)
    return ax.chart("Gaps between tokens at the fast reader: share at or below each gap", 164,
                    ("gap between tokens, ms", "% of gaps"), [Line("s-fast", "gaps", ax.points(steps))], marks,
                    table)


def _policies_delivered(report: Report) -> Chart:
    runs = {p: report.runs[p] for p in POLICIES if p in report.runs}
    named = [(p, _delivered(r)) for p, r in runs.items()]
    ax = _Axes(0.0, max(r.wall_ns for r in runs.values()) / 1e6, float(report.params.tokens))
    lines = [Line("s-" + p, p, ax.points(pts)) for p, pts in named]
    marks = [ax.mark(a, f"disconnect away {report.retry_ms} ms", until=b)
             for a, b in (_waits(runs["disconnect"]) if "disconnect" in runs else [])]
    table = _sampled("Tokens delivered under each policy, at times along the chart", "ms", named, ax.xs)
    return ax.chart("Tokens delivered over time, per policy", 204, ("ms since the request", "tokens delivered"),
                    lines, marks, table)


def _depth_panels(report: Report) -> list[Chart]:
    runs = {p: report.runs[p] for p in POLICIES if p in report.runs}
    end = max(r.wall_ns for r in runs.values()) / 1e6
    panels = []
    for policy, result in runs.items():
        ax = _Axes(0.0, end, float(result.spec.capacity), y_count=2)
        wall = result.wall_ns / 1e6
        marks = [ax.mark(e.t_ns / 1e6, "cut") for e in result.trace if e.decision == "cut"]
        marks += [ax.mark(a, f"away {report.retry_ms} ms", until=b) for a, b in _waits(result)]
        marks.append(ax.mark(wall, f"done {wall:.1f} ms"))
        depth = _depth(result)
        full = sum(b[0] - a[0] for a, b in pairwise(depth) if a[1] >= result.spec.capacity)
        table = Table(f"{policy}: the buffer over the run", ("ends at ms", "most queued", "time full, ms"),
                      ((f"{wall:.1f}", f"{result.stats.high_water} of {result.spec.capacity}", f"{full:.1f}"),))
        panels.append(ax.chart(f"{policy}: tokens queued over time", 64, ("ms since the request", "queued"),
                               [Line("s-" + policy, "tokens queued", ax.band(depth, wall), band=True)], marks,
                               table))
    return panels


def _resume(report: Report) -> Chart:
    result, r = report.runs["cancel"], report.resume
    pairs = [(t / 1e6, float(i)) for t, i in zip(result.arrivals_ns, result.ids, strict=True)]
    ax = _Axes(0.0, result.wall_ns / 1e6, float(max(r.last_index, 1)))
    lines = [Line("s-first", "first connection", ax.points(pairs[: r.first_tokens])),
             Line("s-second", "after the reconnect", ax.points(pairs[r.first_tokens:]))]
    marks = [ax.mark(r.hang_up_ms, f"away {report.retry_ms} ms", until=r.reconnect_ms),
             ax.mark(r.reconnect_ms, r.sent_header)]
    rows = (("hung up", f"{r.hang_up_ms:.1f}", r.last_event_id_shown),
            ("reconnected", f"{r.reconnect_ms:.1f}", r.sent_header),
            ("first id after it", f"{pairs[r.first_tokens][0]:.1f}" if len(pairs) > r.first_tokens else "-",
             str(r.resumed_at)),
            ("last id", f"{pairs[-1][0]:.1f}" if pairs else "-", str(r.last_index)))
    table = Table("The resume, moment by moment", ("moment", "ms", "event id"), rows)
    return ax.chart("The resumed stream: event id by arrival time", 184, ("ms since the request", "event id"),
                    lines, marks, table)


def charts(report: Report) -> dict[str, object]:
    """Return the page's charts: ``arrivals``, ``gaps`` (None for one token), ``delivered``, ``depth`` (one
    panel per policy, one time axis) and ``resume``; ``lead``: the one the page opens with, the scenario's."""
    return {"arrivals": _arrivals(report), "gaps": _gaps(report), "delivered": _policies_delivered(report),
            "depth": _depth_panels(report), "resume": _resume(report),
            "lead": "arrivals" if report.params.scenario == "baseline" else "delivered"}
