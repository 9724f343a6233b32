"""The report: its parameters, the runs it is made of, its sections, the model, and its renderings.

``params`` (query string and flags) -> ``plan`` (the runs) -> ``sections`` and
``transport`` (figures computed from the runs) -> ``model`` (the ``Report``
record) -> ``render`` (text, JSON, HTML through ``templating``, ``charts`` and
``to_json``).  ``render(query) -> (status, headers, body)`` is the one pure
function the serverless handler calls.
"""

from .model import Report, assemble, build_report
from .params import ParamError, ReportParams, parse_query
from .render import render, render_report, report_json

__all__ = ["ParamError", "Report", "ReportParams", "assemble", "build_report", "parse_query", "render",
           "render_report", "report_json"]
