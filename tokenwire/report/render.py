"""The report rendered three ways (text, JSON, HTML), and the one pure function the handler calls.

How this works: ``render(query)`` parses the query (``tokenwire.params``),
builds the report model once (``tokenwire.report``) and lays it out:
``report.txt`` and ``report.html`` are jinja2 templates in one environment
built at import (``StrictUndefined``, ``trim_blocks``, ``lstrip_blocks``,
``keep_trailing_newline``; autoescape for ``.html`` only); JSON is
``json.dumps`` of a dict built from the same record.  Templates do no
arithmetic: numbers arrive computed and rounded, and the few filters below
only format and wrap them.  SVG chart geometry (scales, ticks, polylines)
is computed here, server-side, so the HTML page needs no script.

The HTML page carries its stylesheet in one ``<style>`` element whose
SHA-256 is in the Content-Security-Policy, so no other style, script or
fetch can run on the page.  ``cli_main`` is ``tokenwire report``.

A report measured over sockets (``tokenwire demo``, ``Report.sockets``)
goes through the same templates and ``report_json``: the templates switch
the title, the clock line and the closing on ``r.sockets`` and add section
5; it renders as text or JSON only.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

import jinja2
from markupsafe import Markup

from .params import (
    MAX_BUFFER,
    MAX_PRODUCER_MS,
    MAX_READER_MS,
    MAX_TOKENS,
    MIN_PRODUCER_MS,
    MIN_TOKENS,
    SCENARIOS,
    HelpRequested,
    ParamError,
    ReportParams,
    cli_usage,
    parse_cli,
    parse_query,
)
from .plan import POLICIES, virtual_wall_ms
from .report import Report, build_report
from .sections import Resume

__all__ = ["REAL_BUDGET_MS", "cli_main", "render", "render_report", "report_json"]

WIDTH = 78
# Paragraphs whose wrapping is kept: the page's fixed prose is a dozen, and a
# few hundred more keep the figure-bearing ones of recently asked pages.
WRAP_CACHE = 256
# A real-clock page runs every scenario on threads, one after another; past
# this estimate (from the virtual clock) the visitor waits too long and the
# serverless function nears its maxDuration (vercel.json).
REAL_BUDGET_MS = 5000.0
# Virtual pages are deterministic for a given version of the code: caches may keep them.
VIRTUAL_CACHE = "public, max-age=3600"

# The form's input limits, the same as the validator's.
BOUNDS = {"tokens": (MIN_TOKENS, MAX_TOKENS), "buffer": (1, MAX_BUFFER), "reader_ms": (0, MAX_READER_MS),
          "producer_ms": (MIN_PRODUCER_MS, MAX_PRODUCER_MS)}

CONTENT_TYPES = {"text": "text/plain; charset=utf-8", "json": "application/json; charset=utf-8",
                 "html": "text/html; charset=utf-8"}


# ------------------------------------------------------------ filters (formatting only)


def _fill(text: str, width: int, head: str = "", indent: str = "") -> str:
    """Greedy word wrap (what ``textwrap.fill`` does here, at a fifth of the cost); long words stay whole."""
    lines, line, empty = [], head, True
    for word in text.split():
        if not empty and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = indent + word
        else:
            line = line + word if empty else line + " " + word
        empty = False
    lines.append(line)
    return "\n".join(lines)


@functools.lru_cache(maxsize=WRAP_CACHE)
def _wrap(text: str, width: int = WIDTH) -> str:
    """Wrap each non-empty line of ``text`` as a paragraph; always ends with a newline.

    Memoised: most of it is fixed prose.
    """
    return "\n".join(_fill(line, width) for line in text.split("\n") if line.strip()) + "\n"


def _hang(value: object, label: str, width: int = 19) -> str:
    """``label`` in a column of ``width``, then ``value`` wrapped under itself."""
    head = label.ljust(width - 1) + " " if label else " " * width
    return _fill(str(value), WIDTH, head, " " * width)


def _spread(left: str, right: str) -> str:
    return left + " " * max(1, WIDTH - len(left) - len(right)) + right if right else left


def _frame_lines(frame: str) -> list[str]:
    return [f"| {line}" if line else "|" for line in frame.split("\n")[:-1]]


def _num(value: float) -> str:
    return f"{value:.6f}".rstrip("0").rstrip(".")


_COUNTS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


def _count(n: int) -> str:
    """``five``, ``12``: a small count in words."""
    return _COUNTS[n] if 0 <= n < len(_COUNTS) else str(n)


def _times(n: int) -> str:
    """``once``, ``twice``, ``five times``, ``12 times``."""
    return {1: "once", 2: "twice"}.get(n, f"{_count(n)} times")


def _and_list(items: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return " and ".join([", ".join(items[:-1]), items[-1]] if len(items) > 1 else items)


def _make_env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("tokenwire", "templates"),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html",), default_for_string=False),
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
        auto_reload=False,   # templates ship with the package: no stat() per render
    )
    env.filters.update(
        wrap=_wrap, hang=_hang, spread=_spread, frame_lines=_frame_lines, num=_num, times=_times, count=_count,
        and_list=_and_list,
        ms=lambda v: f"{v:.2f}", ms1=lambda v: f"{v:.1f}",
        ms_or=lambda v, other: other if v is None else f"{v:.2f}",
        idlist=lambda ids: "[" + ", ".join(map(str, ids)) + "]",
    )
    return env


ENV = _make_env()
# Templates compile on first use (the environment caches them): a cold
# serverless start that answers in text does not pay for the HTML one.
CSS = Markup(ENV.loader.get_source(ENV, "report.css")[0])  # type: ignore[union-attr]
CSS_HASH = base64.b64encode(hashlib.sha256(CSS.encode()).digest()).decode()
CSP = (f"default-src 'none'; img-src 'self' data:; style-src 'sha256-{CSS_HASH}'; "
       "form-action 'self'; base-uri 'none'; frame-ancestors 'none'")


# ------------------------------------------------------------ JSON


def _resume_json(r: Resume) -> dict[str, Any]:
    return {
        "on_disconnect": r.mode, "first_tokens": r.first_tokens, "last_event_id": r.last_event_id,
        "first_completed": r.first_completed, "generated_at_hang_up": r.generated_at_hang_up,
        "generated_before_cancel": r.generated_at_reconnect if r.mode == "cancel" else None,
        "generated_at_reconnect": r.generated_at_reconnect, "generated_while_away": r.generated_while_away,
        "resumed_at": r.resumed_at, "second_tokens": r.second_tokens, "completed": r.completed,
        "replayed": r.replayed, "ids_head": list(r.ids_head), "ids_tail": list(r.ids_tail),
        "contiguous": r.contiguous, "duplicates": list(r.duplicates), "text_matches": r.text_matches,
        "generated_total": r.generated_total, "hang_up_ms": r.hang_up_ms, "reconnect_ms": r.reconnect_ms,
        "waited_for_model_ms": r.waited_for_model_ms, "catch_up_ms": r.catch_up_ms,
    }


def _record(record: Any, leave_out: str = "") -> dict[str, Any]:
    """A frozen record's fields as a dict, ``leave_out`` left out."""
    return {f.name: getattr(record, f.name) for f in fields(record) if f.name != leave_out}


def report_json(report: Report) -> dict[str, Any]:
    """Return the report as a JSON-ready dict; the same figures as the text and HTML.

    Over sockets ``scenario`` and ``detail`` are None (no scenario was
    chosen, and ``params`` leaves it out), ``buffer`` and ``resume`` hold the
    runs the demo made, and ``transport``, ``sockets`` (section 5) and
    ``wall_s`` are added.
    """
    p, w, t, s, d = report.params, report.wire, report.timing, report.sockets, report.detail
    buffer = {row.policy: {
        "delivered": row.delivered, "total": row.total, "dropped": row.dropped, "gap_runs": row.gap_runs,
        "high_water": row.high_water, "capacity": row.capacity, "producer_waited_ms": row.producer_waited_ms,
        "pauses": row.pauses, "wall_ms": row.wall_ms, "cuts": row.cuts, "reconnects": row.reconnects,
        "lost_runs": [list(run) for run in row.lost],
    } for row in report.buffer}
    resume = _resume_json(report.resume)
    if report.detach is not None:
        resume["detach"] = _resume_json(report.detach)
    head: dict[str, Any] = {"scenario": None if d is None else p.scenario, "clock": p.clock}
    if s is not None:
        head["transport"] = report.transport
    data: dict[str, Any] = {
        **head, "params": _record(p, "scenario" if d is None else ""),
        "wire": {"first_frames": w.first_frames, "closing_frame": w.closing, "frames_skipped": w.skipped,
                 "frames_read": w.frames_read, "token_frames": w.token_frames, "round_trip": w.round_trip},
        "timing": _record(t, "first_token_percent"),
        "buffer": buffer, "resume": resume,
        "detail": None if d is None else {
            "scenario": d.scenario, "section": d.section, "run": d.run, "decisions": d.decisions,
            "rows": [None if row is None else _record(row) for row in d.rows]},
    }
    if s is not None:
        resume["sent_when_noticed"] = s.sent_when_noticed
        data["sockets"] = {
            "sndbuf_asked": s.sndbuf_asked, "rcvbuf_asked": s.rcvbuf_asked, "recv_chunk": s.recv_chunk,
            "connections": {name: _record(k) for name, k in s.connections.items()},
            "kernel_defaults": None if s.kernel_defaults is None else dict(zip(("tcp_rmem", "tcp_wmem"),
                                                                               s.kernel_defaults)),
            "answer_bytes": s.answer_bytes, "in_memory": _record(s.in_memory),
        }
        data["wall_s"] = s.wall_s
    return data


# ------------------------------------------------------------ SVG charts


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
        x_ticks=tuple((sx(x), _num(round(x, 3))) for x in x_ticks),
        y_ticks=tuple((sy(y), _num(round(y, 3))) for y in y_ticks),
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


def _charts(report: Report) -> dict[str, Any]:
    p = report.params
    arrivals = _chart(
        "token arrival: fast reader against slow reader",
        [("s-fast", "fast reader (0 ms, buffer 64)", _arrivals(report, "baseline")),
         ("s-slow", f"slow reader ({_num(p.reader_ms)} ms, buffer {p.buffer}, block)", _arrivals(report, "block"))],
        x_label="ms since the request", y_label="tokens read")
    return {"arrivals": arrivals, "depth": [_depth_chart(report, policy) for policy in POLICIES],
            "resume": _resume_chart(report)}


# ------------------------------------------------------------ pages


def _links(params: ReportParams) -> list[tuple[str, str, bool]]:
    return [(name, "?" + params.query(scenario=name, format="html"), name == params.scenario) for name in SCENARIOS]


def render_report(report: Report) -> bytes:
    """Return the report's body in its params' format, as UTF-8 bytes.

    Raises ``ValueError`` for HTML of a report measured over sockets (the
    page's charts and form are for the memory transport).
    """
    fmt = report.params.format
    if fmt == "html" and report.sockets is not None:
        raise ValueError("a report measured over sockets renders as text or json, not html")
    if fmt == "json":
        return (json.dumps(report_json(report), indent=2) + "\n").encode()
    if fmt == "html":
        text = ENV.get_template("report.html").render(
            r=report, css=CSS, charts=_charts(report), links=_links(report.params), bounds=BOUNDS,
            other_formats=[(f, "?" + report.params.query(format=f)) for f in ("text", "json")])
        return text.encode()
    return ENV.get_template("report.txt").render(r=report).encode()


def check_real_budget(params: ReportParams) -> None:
    """Raise ``ParamError`` if a real-clock page for ``params`` would take over ``REAL_BUDGET_MS``."""
    if params.clock != "real":
        return
    estimate = virtual_wall_ms(params)
    if estimate > REAL_BUDGET_MS:
        raise ParamError(
            f"clock=real would take about {estimate / 1000:.1f} s of wall clock with these parameters, over the "
            f"{REAL_BUDGET_MS / 1000:g} s a page may take; use clock=virtual for the same report computed at once "
            f"(or fewer tokens, a faster reader or a larger buffer)")


def headers_for(params: ReportParams) -> list[tuple[str, str]]:
    """Return the response headers (without Content-Length) of a report page."""
    headers = [("Content-Type", CONTENT_TYPES[params.format]), ("X-Content-Type-Options", "nosniff"),
               ("Cache-Control", VIRTUAL_CACHE if params.clock == "virtual" else "no-store")]
    if params.format == "html":
        headers += [("Content-Security-Policy", CSP), ("Referrer-Policy", "no-referrer")]
    return headers


def error_response(status: int, message: str, extra: Sequence[tuple[str, str]] = ()) -> tuple[
        int, list[tuple[str, str]], bytes]:
    """Return a plain-text error response: one line, not cacheable."""
    headers = [("Content-Type", CONTENT_TYPES["text"]), ("X-Content-Type-Options", "nosniff"),
               ("Cache-Control", "no-store"), *extra]
    return status, headers, (message + "\n").encode()


def render(params_query: str) -> tuple[int, list[tuple[str, str]], bytes]:
    """Return ``(status, headers, body)`` for a report query string (no ``?``). No I/O.

    A bad parameter is a 400 with the one-line message; everything else a
    200 in the requested format.  Headers exclude Content-Length.
    """
    try:
        params = parse_query(params_query)
        check_real_budget(params)
    except ParamError as exc:
        return error_response(400, str(exc))
    return 200, headers_for(params), render_report(build_report(params))


def cli_main(argv: list[str]) -> int:
    """``tokenwire report [--flag value ...]``: print the report; 2 with one stderr line on bad flags."""
    try:
        params = parse_cli(argv)
        check_real_budget(params)
    except HelpRequested:
        print(cli_usage())
        return 0
    except ParamError as exc:
        print(f"tokenwire report: {exc}", file=sys.stderr)
        return 2
    sys.stdout.buffer.write(render_report(build_report(params)))
    sys.stdout.flush()
    return 0
