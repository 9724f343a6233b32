"""The report rendered three ways (text, JSON, HTML), and the one pure function the handler calls.

How this works: ``render(query)`` parses the query (``params``), builds the
report model once (``model``) and lays it out: ``report.txt`` and
``report.html`` are jinja2 templates (``templating``), the HTML page's SVG
charts are computed in ``charts``, and JSON is ``json.dumps`` of the dict
``to_json`` builds from the same record.  ``cli_main`` is ``tokenwire report``;
its report speaks of flags and the command (``voice.COMMAND``), a page of
query parameters.  What only the HTML or JSON needs (charts, the
stylesheet, ``json``) is imported when first used: a serverless cold start
that answers in text does not pay for it.

A report measured over sockets (``tokenwire demo``, ``Report.sockets``)
goes through the same templates and ``report_json``: the templates switch
the title, the clock line and the closing on ``r.sockets`` and add section
5; it renders as text or JSON only.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from .model import Report, build_report
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
    default_cut_after,
    parse_cli,
    parse_query,
)
from .plan import virtual_wall_ms
from .voice import COMMAND, PAGE, Voice

__all__ = ["REAL_BUDGET_MS", "cli_main", "live_query", "render", "render_report", "report_json"]

# A real-clock page runs every scenario in real time, one after another; past
# this estimate (from the virtual clock) the visitor waits too long and the
# serverless function nears its maxDuration (vercel.json).
REAL_BUDGET_MS = 5000.0
# Virtual pages are deterministic for a given version of the code: caches may keep them.
VIRTUAL_CACHE = "public, max-age=3600"

# The form's input limits, the same as the validator's.
BOUNDS = {"tokens": (MIN_TOKENS, MAX_TOKENS), "buffer": (1, MAX_BUFFER), "reader_ms": (0, MAX_READER_MS),
          "producer_ms": (MIN_PRODUCER_MS, MAX_PRODUCER_MS)}

# Where the controls of a page saved by ``tokenwire report --format html`` point: ``tokenwire serve`` at its
# default address (a page opened from a file would only reload the file for ``?scenario=...``).
SERVE_URL = "http://127.0.0.1:8000/"

CONTENT_TYPES = {"text": "text/plain; charset=utf-8", "json": "application/json; charset=utf-8",
                 "html": "text/html; charset=utf-8"}


def report_json(report: Report) -> dict[str, object]:
    """Return the report as a JSON-ready dict (``to_json.report_json``, imported when first used)."""
    from .to_json import report_json as to_json
    return to_json(report)


# ------------------------------------------------------------ pages


def _links(params: ReportParams, base: str) -> list[tuple[str, str, bool]]:
    return [(name, base + "?" + params.query(scenario=name, format="html"), name == params.scenario)
            for name in SCENARIOS]


def live_query(params: ReportParams) -> str:
    """Return the ``/live`` query for the same parameters (no ``?``): the producer's, and the report's cut.

    The live page's reader is the browser, so ``reader_ms``, ``clock`` and
    ``format`` stay behind; its cut is explicit (live, no ``cut_after`` means no cut).
    """
    same = params.query(format="text", clock="virtual", reader_ms=3.0, cut_after=default_cut_after(params.tokens))
    return (same + "&" if same else "") + f"cut_after={params.cut_after}"


def _html(report: Report, voice: Voice) -> str:
    from .charts import charts
    from .templating import ENV, css
    p = report.params
    base = SERVE_URL if voice.command else ""       # a saved page's controls ask tokenwire serve, not the file
    return ENV.get_template("report.html").render(
        r=report, via=voice, css=css(), charts=charts(report), links=_links(p, base), bounds=BOUNDS,
        default_cut=default_cut_after(p.tokens), live_href="/live?" + live_query(p) if voice.served_live else None,
        other_formats=[(f, base + "?" + p.query(format=f)) for f in ("text", "json")], serve_url=SERVE_URL,
        form_action=base)


def render_report(report: Report, voice: Voice = PAGE) -> bytes:
    """Return the report's body in its params' format, as UTF-8 bytes, worded for ``voice``.

    Raises ``ValueError`` for HTML of a report measured over sockets (the
    page's charts and form are for the memory transport).
    """
    fmt = report.params.format
    if fmt == "html" and report.sockets is not None:
        raise ValueError("a report measured over sockets renders as text or json, not html")
    if fmt == "json":
        import json
        return (json.dumps(report_json(report), indent=2) + "\n").encode()
    if fmt == "html":
        return _html(report, voice).encode()
    from .templating import ENV
    return ENV.get_template("report.txt").render(r=report, via=voice).encode()


def check_real_budget(params: ReportParams, voice: Voice = PAGE) -> None:
    """Raise ``ParamError`` if a real-clock page for ``params`` would take over ``REAL_BUDGET_MS``."""
    if params.clock != "real":
        return
    estimate = virtual_wall_ms(params)
    if estimate > REAL_BUDGET_MS:
        raise ParamError(
            f"{voice.setting('clock', 'real')} would take about {estimate / 1000:.1f} s of wall clock with these "
            f"parameters, over the {REAL_BUDGET_MS / 1000:g} s a {'report' if voice.command else 'page'} may take; "
            f"use {voice.setting('clock', 'virtual')} for the same report computed at once "
            f"(or fewer tokens, a faster reader or a larger buffer)")


def headers_for(params: ReportParams) -> list[tuple[str, str]]:
    """Return the response headers (without Content-Length) of a report page."""
    headers = [("Content-Type", CONTENT_TYPES[params.format]), ("X-Content-Type-Options", "nosniff"),
               ("Cache-Control", VIRTUAL_CACHE if params.clock == "virtual" else "no-store")]
    if params.format == "html":
        from .templating import csp
        headers += [("Content-Security-Policy", csp()), ("Referrer-Policy", "no-referrer")]
    return headers


def error_response(status: int, message: str, extra: Sequence[tuple[str, str]] = ()) -> tuple[
        int, list[tuple[str, str]], bytes]:
    """Return a plain-text error response: one line, not cacheable."""
    headers = [("Content-Type", CONTENT_TYPES["text"]), ("X-Content-Type-Options", "nosniff"),
               ("Cache-Control", "no-store"), *extra]
    return status, headers, (message + "\n").encode()


def render(params_query: str, *, served_live: bool = False) -> tuple[int, list[tuple[str, str]], bytes]:
    """Return ``(status, headers, body)`` for a report query string (no ``?``). No I/O.

    A bad parameter is a 400 with the one-line message; everything else a
    200 in the requested format.  ``served_live``: the page is served by
    ``tokenwire serve``, so it says the stream can be watched at ``/live``
    and links there.  Headers exclude Content-Length.
    """
    try:
        params = parse_query(params_query)
        check_real_budget(params)
    except ParamError as exc:
        return error_response(400, str(exc))
    voice = Voice(served_live=True) if served_live else PAGE
    return 200, headers_for(params), render_report(build_report(params), voice)


def cli_main(argv: list[str]) -> int:
    """``tokenwire report [--flag value ...]``: print the report; raises ``ParamError`` for a bad flag (the
    command line words it: ``tokenwire report: <the line>``, exit 2)."""
    try:
        params = parse_cli(argv)
        check_real_budget(params, COMMAND)
    except HelpRequested:
        print(cli_usage())
        return 0
    sys.stdout.buffer.write(render_report(build_report(params), COMMAND))
    sys.stdout.flush()
    return 0
