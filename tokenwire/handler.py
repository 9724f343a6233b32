"""The HTTP edge: ``handler``, the ``BaseHTTPRequestHandler`` Vercel's Python runtime calls.

How this works: ``respond(method, target)`` is pure (no I/O): it routes the
request target to the report (``/`` and ``/api/report``, Vercel's path for
``api/report.py``), a plain-text 404 for any other path, or a 405 for any
method but GET and HEAD, and returns ``(status, headers, body)``.  The
handler's ``do_*`` methods only call it and write the answer, so the same
class serves Vercel and ``ThreadingHTTPServer`` locally; the live server
(``tokenwire.live``) calls ``respond`` for the same pages from its own routes.

Every answer carries ``Content-Length`` (HEAD: the length GET would send,
no body) and no ``Server`` version banner.
"""

from __future__ import annotations

import os
import sys
import traceback
from http.server import BaseHTTPRequestHandler

from .report.render import error_response, render

__all__ = ["LIVE_LOG_ENV", "LIVE_LOG_SCHEMES", "REPORT_PATHS", "Response", "handler", "live_configured", "respond"]

REPORT_PATHS = ("/", "/api/report")
ALLOW = "GET, HEAD"

Response = tuple[int, list[tuple[str, str]], bytes]


def respond(method: str, target: str, *, served_live: bool = False) -> Response:
    """Return ``(status, headers, body)`` for ``method`` on request ``target`` (path and query).

    ``served_live``: the live server answers (its report links to ``/live``).
    Headers exclude Content-Length.  Never raises: an unexpected error is a
    plain 500 (the traceback goes to stderr, never to the visitor).
    """
    path, _, query = target.partition("#")[0].partition("?")
    if method not in ("GET", "HEAD"):
        return error_response(405, f"405 method not allowed: {method}; this page answers GET and HEAD",
                              [("Allow", ALLOW)])
    if path not in REPORT_PATHS:
        return error_response(404, f"404 not found: {path[:200]!r}; the report is at / "
                                   "(try /?scenario=block or /?format=html)")
    try:
        return render(query, served_live=True) if served_live else render(query)
    except Exception:  # noqa: BLE001 - the edge turns any bug into a 500, logged
        traceback.print_exc(file=sys.stderr)
        return error_response(500, "500 internal error: the report could not be built")


# The setting the hosted live page (api/live.py) reads its token log from; where it is set, the live page is
# served beside this report, which then links to it.  The name is tokenwire.redislog.streams.LOG_URL_ENV's (a
# test holds them equal): importing that module here would add a third to this function's cold start.
LIVE_LOG_ENV = "TOKENWIRE_LOG_URL"
# The log URLs it serves the page on: tokenwire.asgi.hosted.SHARED_SCHEMES (a test holds them equal, as above).
LIVE_LOG_SCHEMES = ("redis://", "rediss://", "redis+sentinel://", "rediss+sentinel://")


def live_configured() -> bool:
    """True where the hosted live page has its token log (``$TOKENWIRE_LOG_URL`` is a shared log's URL)."""
    return os.environ.get(LIVE_LOG_ENV, "").startswith(LIVE_LOG_SCHEMES)


class handler(BaseHTTPRequestHandler):  # noqa: N801 - Vercel looks for this name
    """Serve the report; GET and HEAD only, every other method 405."""

    error_content_type = "text/plain; charset=utf-8"
    error_message_format = "%(code)d %(message)s\n"

    def version_string(self) -> str:
        """The Server header: the name only, no version banner."""
        return "tokenwire"

    def _send(self, response: Response, *, body: bool = True) -> None:
        status, headers, payload = response
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if body:
            self.wfile.write(payload)

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        self._send(respond("GET", self.path, served_live=live_configured()))

    def do_HEAD(self) -> None:  # noqa: N802
        self._send(respond("GET", self.path, served_live=live_configured()), body=False)

    def _not_allowed(self) -> None:
        self._send(respond(self.command, self.path))

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _not_allowed  # noqa: N815
