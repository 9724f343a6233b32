"""The live page: ``GET /live`` and its script and stylesheet, the same bytes from either server.

How this works: the page is the report's jinja2 environment's ``live.html``
with the server's heartbeat and the live parameters filled in; it runs only
its own script and stylesheet (``/static/live.js``, ``/static/live.css``),
under a Content-Security-Policy that allows nothing else, opens a stream
with ``POST /streams`` and reads it with the browser's ``EventSource``.
"""

from __future__ import annotations

from importlib import resources

from ..core.frames import DEFAULT_RETRY_MS
from ..core.model import ANSWER
from ..report.params import DEFAULTS
from ..report.templating import ENV, live_stylesheet
from .config import RETRY_AFTER_S, LiveConfig
from .decide import refusal
from .decisions import Answer
from .params import LIVE_PARAMS, RequestError
from .rules import NO_STORE, SECURITY_HEADERS, method_error

__all__ = ["ALLOW_PAGE", "LIVE_CSP", "LIVE_PACE_MS", "live_page", "page_allow", "page_answer", "static_file"]

# The methods the page and its files take (a 405's Allow).
ALLOW_PAGE = "GET, HEAD"
_STATIC = {"live.js": "text/javascript; charset=utf-8", "live.css": "text/css; charset=utf-8"}
# The live page runs only its own script and stylesheet and talks only to
# this origin; nothing may frame it, and no referrer leaves it.
LIVE_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
            "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
# The live page's model pace when its address names none: slow enough to watch
# tokens arrive (the report's 0.5 ms would land 40 tokens in a blink).
LIVE_PACE_MS = 25


def page_allow(path: str) -> str | None:
    """The ``Allow`` value of the page or one of its files, None for any other path."""
    if path == "/live" or (path.startswith("/static/") and path[len("/static/"):] in _STATIC):
        return ALLOW_PAGE
    return None


def page_answer(path: str, method: str, config: LiveConfig) -> Answer | None:
    """The answer to ``method`` on the page or one of its files (405, 404 as refusals); None for any other path."""
    allow = page_allow(path)
    if allow is None:
        return None
    try:
        if method not in allow.split(", "):
            raise method_error(path, method, allow)
        return live_page(config) if path == "/live" else static_file(path[len("/static/"):])
    except RequestError as exc:
        return refusal(exc)


def live_page(config: LiveConfig) -> Answer:
    """The page, with ``config``'s heartbeat, and the canned answer's length and default cut (``tokens``)."""
    body = ENV.get_template("live.html").render(
        heartbeat_s=f"{config.heartbeat_s:g}", live_params=", ".join(LIVE_PARAMS),
        retry_after_s=RETRY_AFTER_S, retry_ms=DEFAULT_RETRY_MS, pace_ms=LIVE_PACE_MS, answer_tokens=len(ANSWER),
        default_tokens=DEFAULTS.tokens).encode()
    return Answer(200, (("Content-Type", "text/html; charset=utf-8"), *SECURITY_HEADERS,
                        ("Content-Security-Policy", LIVE_CSP), *NO_STORE), body)


def static_file(name: str) -> Answer:
    """``/static/<name>``; raises ``RequestError`` 404 for a file the page does not have."""
    content_type = _STATIC.get(name)
    if content_type is None:
        raise RequestError(404, f"no static file {name!r}")
    if name == "live.css":          # it starts with the report's stylesheet, so both pages look alike
        body = live_stylesheet()
    else:
        body = resources.files("tokenwire").joinpath("live", "static", name).read_bytes()   # not importing live/
    return Answer(200, (("Content-Type", content_type), *SECURITY_HEADERS, ("Cache-Control", "no-cache")), body)
