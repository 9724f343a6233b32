"""The HTML page's SVG charts, laid out server-side so the page needs no script.

How this works: ``charts(report)`` computes every chart's geometry (scales,
nice ticks, polylines, markers) in pixels; ``report.html`` only places what
it is given.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .model import Report
from .plan import POLICIES
from .templating import num

__all__ = ["Chart", "Marker", "Series", "charts"]


@dataclass(frozen=True, slots=True)
class Series:
    """One line: its CSS class, legend label, SVG points, and where its legend key goes."""

    css: str
    key_css: str
    label: str
    points: str          # "x,y x,y ..." in SVG pixels
    key_x: float
    key_y: float
    key_text_x: float
    key_text_y: float


@dataclass(frozen=True, slots=True)
class Marker:
    """A vertical dashed line at ``x`` with a label beside it."""

    x: float
    label: str
    label_x: float
    label_y: float
    anchor: str


@dataclass(frozen=True, slots=True)
class Chart:
    """Everything an SVG line chart needs, in pixels: the template only places it."""

    title: str
    width: int
    height: int
    left: int
    top: int
    right: int           # x of the plot's right edge
    bottom: int          # y of the plot's bottom edge
    x_ticks: tuple[tuple[float, str], ...]
    y_ticks: tuple[tuple[float, str], ...]
    x_label: str
    y_label: str
    series: tuple[Series, ...]
    markers: tuple[Marker, ...]

    @property
    def tick_label_y(self) -> int:
        return self.bottom + 14

    @property
    def y_tick_x(self) -> int:
        return self.left - 5

    @property
    def x_label_x(self) -> float:
        return (self.left + self.right) / 2

    @property
    def x_label_y(self) -> int:
        return self.bottom + 30

    @property
    def y_label_x(self) -> int:
        return 12

    @property
    def y_label_y(self) -> float:
        return (self.top + self.bottom) / 2


def _nice_step(span: float, count: int) -> float:
    """Return a 1, 2, 2.5 or 5 times a power of ten step giving about ``count`` ticks over ``span``."""
    raw = max(span, 1e-9) / count
    magnitude = 10.0 ** math.floor(math.log10(raw))
    return next(f * magnitude for f in (1, 2, 2.5, 5, 10) if f * magnitude >= raw * (1 - 1e-9))


def _ticks(high: float, count: int) -> list[float]:
    step = _nice_step(high, count)
    return [i * step for i in range(int(high / step + 1e-9) + 1)]


def _chart(title: str, lines: Sequence[tuple[str, str, Sequence[tuple[float, float]]]], *, x_label: str,
           y_label: str, markers: Sequence[tuple[float, str]] = (), width: int = 640, height: int = 250,
           y_max: float | None = None) -> Chart:
    """Lay out ``lines`` (css class, label, data points) on shared linear axes from 0."""
    keyed = len(lines) > 1                    # a legend above the plot, one row per line
    left, top, right, bottom = 52, 14 + (16 * len(lines) if keyed else 0), width - 14, height - 40
    xs = [x for _, _, pts in lines for x, _ in pts] + [x for x, _ in markers]
    x_high = max(xs, default=1.0) or 1.0
    y_high = y_max if y_max is not None else (max((y for _, _, pts in lines for _, y in pts), default=1.0) or 1.0)
    x_ticks, y_ticks = _ticks(x_high, 6), _ticks(y_high, 4)
    x_top, y_top = max(x_high, x_ticks[-1]), max(y_high, y_ticks[-1])

    def sx(x: float) -> float:
        return round(left + (right - left) * x / x_top, 1)

    def sy(y: float) -> float:
        return round(bottom - (bottom - top) * y / y_top, 1)

    series = tuple(
        Series(css=css, key_css="key-" + css.removeprefix("s-"), label=label,
               points=_points(pts, left, bottom, (right - left) / x_top, (bottom - top) / y_top),
               key_x=left, key_y=6 + 16 * i, key_text_x=left + 15, key_text_y=15 + 16 * i)
        for i, (css, label, pts) in enumerate(lines))
    marks = []
    for i, (x, label) in enumerate(markers):
        px = sx(x)
        flip = px > (left + right) / 2            # label to the left of a line in the right half
        marks.append(Marker(x=px, label=label, label_x=px - 4 if flip else px + 4,
                            label_y=top + 12 + 14 * (i % 2), anchor="end" if flip else "start"))
    return Chart(
        title=title, width=width, height=height, left=left, top=top, right=right, bottom=bottom,
        x_ticks=tuple((sx(x), num(round(x, 3))) for x in x_ticks),
        y_ticks=tuple((sy(y), num(round(y, 3))) for y in y_ticks),
        x_label=x_label, y_label=y_label, series=series, markers=tuple(marks),
    )


def _points(pts: Sequence[tuple[float, float]], left: float, bottom: float, kx: float, ky: float) -> str:
    """SVG points for data ``pts`` (y grows downwards), to 0.1 px."""
    return " ".join([f"{left + kx * x:.1f},{bottom - ky * y:.1f}" for x, y in pts])


def _arrivals(report: Report, name: str) -> list[tuple[float, float]]:
    result = report.runs[name]
    return [(t / 1e6, i + 1) for i, t in enumerate(result.arrivals_ns)]


def _depth_chart(report: Report, policy: str) -> Chart:
    result = report.runs[policy]
    points: list[tuple[float, float]] = [(0.0, 0.0)]
    for entry in result.trace:
        t = entry.t_ns / 1e6
        points += [(t, points[-1][1]), (t, entry.depth)]
    cuts = [(e.t_ns / 1e6, "cut") for e in result.trace if e.decision == "cut"]
    return _chart(f"{policy}: buffer depth", [("s-depth", "tokens queued", points)], x_label="ms",
                  y_label="queued", markers=cuts, width=310, height=150, y_max=result.spec.capacity)


def _resume_chart(report: Report) -> Chart:
    result, r = report.runs["cancel"], report.resume
    pairs = list(zip(result.arrivals_ns, result.ids))
    first = [(t / 1e6, i) for t, i in pairs[: r.first_tokens]]
    second = [(t / 1e6, i) for t, i in pairs[r.first_tokens:]]
    return _chart("the resumed stream: event id by arrival time",
                  [("s-first", "first connection", first), ("s-second", "after the reconnect", second)],
                  x_label="ms since the request", y_label="event id",
                  markers=[(r.hang_up_ms, f"hung up after id {r.last_event_id_shown}"),
                           (r.reconnect_ms, r.sent_header)])


def charts(report: Report) -> dict[str, Any]:
    p = report.params
    arrivals = _chart(
        "token arrival: fast reader against slow reader",
        [("s-fast", "fast reader (0 ms, buffer 64)", _arrivals(report, "baseline")),
         ("s-slow", f"slow reader ({num(p.reader_ms)} ms, buffer {p.buffer}, block)", _arrivals(report, "block"))],
        x_label="ms since the request", y_label="tokens read")
    return {"arrivals": arrivals, "depth": [_depth_chart(report, policy) for policy in POLICIES],
            "resume": _resume_chart(report)}
