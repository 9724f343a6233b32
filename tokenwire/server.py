"""``tokenwire serve``: the report handler plus the live SSE endpoints, on real sockets.

How this works: ``LiveHandler`` subclasses the report ``handler`` and adds
the routes a serverless function cannot hold open; every other path falls
back to ``super().do_GET()``.  ``ThreadingHTTPServer`` gives each connection
its own daemon thread, and on that thread the stream's writer process
(``Stream.serve``) runs through ``run_process`` with a ``SocketWire``: a
``Send`` is a ``sendall`` under the write timeout, a silent stream gets a
``: ping`` comment every ``heartbeat_s``, and a peer that is gone makes the
writer disconnect, which cancels the producer (it runs on its own thread,
started by the registry).

Routes (see ``ROUTES`` in the README for the status codes):

- ``POST /streams?<report parameters>[&cut_after=k]`` -> 201 JSON
  ``{"stream_id", "events_url"}``.
- ``GET /streams/<id>/events[?last_event_id=n][&cut_after=k]`` -> the SSE
  stream.  The ``Last-Event-ID`` header wins over ``?last_event_id=``.
- ``GET /stream?<report parameters>[&cut_after=k]`` -> create and stream in
  one request (for ``curl -N``).
- ``GET /live`` and ``GET /static/live.{js,css}`` -> the EventSource page.

Resume cursors (``Last-Event-ID``) are validated strictly: absent or empty
means "from the start"; otherwise ASCII decimal digits without leading
zeros, at most ``MAX_ID_DIGITS`` of them, naming an index the stream has
generated.  The header's bytes are read as UTF-8 and the whitespace HTTP
allows around a field value is not part of it.  Anything else is a 400 that
quotes the value (shortened past ``MAX_ECHO_CHARS``).  An id is an index
within the stream the URL names: one copied from another stream is read as
an index of this one and never reaches the other stream.  The last index of
a finished stream means "I have it all": 204, which tells an
``EventSource`` to stop reconnecting.  A stream the token log no longer
holds (evicted for age or count, or made by a server process that has since
restarted, with the in-memory log) is a 404 that says so; a cursor before
the first token the log still keeps is a 410.  Neither is ever a silent
restart of the stream.

Every method on every path has one answer: a path that is not served is a
404 whatever the method, a served path asked with the wrong method a 405
with ``Allow``.  A request has ``request_timeout_s`` in total to arrive
(request line, headers and body), however slowly its bytes trickle in, so a
slowloris client holds a thread for at most that long.  Errors the standard
library raises while parsing (bad request line, 414, 431, 501) carry the
same security headers as every other answer.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import socket
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qsl, urlencode

import jinja2

from .core.channel import ChannelStats, Policy
from .core.clock import RealClock
from .core.pipeline import RunSpec
from .core.stream import Ending
from .core.threads import run_process
from .core.tokenlog import DEFAULT_MAX_AGE_NS, DEFAULT_MAX_STREAMS, LogError, LogGap, LogUnavailable, UnknownStream
from .handler import REPORT_PATHS, handler, respond
from .params import ParamError, ReportParams, parse_query
from .registry import DEFAULT_MAX_LIVE, Busy, LiveStream, Registry
from .sockets import DEFAULT_WRITE_TIMEOUT_S, SocketWire, shrink_buffers

__all__ = [
    "DEFAULT_HEARTBEAT_S",
    "DEFAULT_REQUEST_TIMEOUT_S",
    "LiveConfig",
    "LiveHandler",
    "LiveServer",
    "cli_main",
    "make_server",
]

# -- limits, each a named default (the README lists them) -------------------
# A silent stream sends ": ping" this often.  Proxies and load balancers
# commonly close a connection idle for 30-60 s; 15 s stays well inside that
# (sse-starlette and many hubs use the same figure).
DEFAULT_HEARTBEAT_S = 15.0
# A client has this long, in total, to send its request line, headers and
# body (slowloris: a trickle of one byte at a time does not extend it).  Real
# clients send the whole request in one packet, so this only needs to cover a
# slow network round trip.
DEFAULT_REQUEST_TIMEOUT_S = 10.0
# Longest request line (method, target, version).  The longest real one here
# is a report query of a few hundred bytes; 8 KiB is what nginx and most
# proxies accept by default.
MAX_REQUEST_LINE = 8 * 1024
# All header lines together.  Browsers send 1-2 KiB; 16 KiB is generous and
# still bounds what each connection thread parses and holds.
MAX_HEADER_BYTES = 16 * 1024
# A POST /streams carries its parameters in the query; a body is not needed
# and is read and discarded up to this size (a form post), refused above.
MAX_BODY_BYTES = 1024
# A resume id has at most this many digits: 9 digits exceed any answer and
# keep a hostile "99999...9" from ever becoming a big int.
MAX_ID_DIGITS = 9
# Pending connections the kernel queues before accept(); the default of 5
# refuses connections when a few hundred clients arrive at once.
REQUEST_QUEUE_SIZE = 1024
# What a 503 asks the client to wait, in seconds: a full server frees a slot
# as soon as any stream ends, and an EventSource retries after `retry` anyway.
RETRY_AFTER_S = 1
# Bad values are quoted in error messages up to this many characters, so a
# 10,000-digit id or a very long parameter never comes back whole.
MAX_ECHO_CHARS = 40
# How many finished connections the server remembers for inspection
# (tests, the demo): bounded, so a long-running server does not grow.
JOURNAL_SIZE = 1024

# Query parameters the live endpoints take that the report does not.
LIVE_PARAMS = ("cut_after", "last_event_id")

_EVENTS_PATH = re.compile(r"/streams/([A-Za-z0-9_-]{1,64})/events")
_DECIMAL = re.compile(r"0|[1-9][0-9]*")
# Where each served path's methods are listed (the 405's Allow).
_ALLOW_STREAMS, _ALLOW_GET, _ALLOW_PAGE = "POST", "GET", "GET, HEAD"
_STATIC = {"live.js": "text/javascript; charset=utf-8", "live.css": "text/css; charset=utf-8"}

# The live page runs only its own script and stylesheet and talks only to
# this origin; nothing may frame it, and no referrer leaves it.
LIVE_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
            "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
_SECURITY_HEADERS = (("X-Content-Type-Options", "nosniff"), ("Referrer-Policy", "no-referrer"))
_SSE_HEADERS = (("Content-Type", "text/event-stream; charset=utf-8"), ("Cache-Control", "no-store"),
                ("X-Accel-Buffering", "no"), ("Connection", "close"))


@dataclass(frozen=True, slots=True)
class LiveConfig:
    """How the live endpoints behave; every time in seconds.

    sndbuf: shrink ``SO_SNDBUF`` of event-stream connections to this many
    bytes (the demo, to make the kernel's queue small and visible); None
    leaves the kernel's autotuning alone.  sample_queues: record the send
    queue (``TIOCOUTQ``) after each frame and keep each connection's wire.
    access_log: print one line per request on stderr.
    """

    heartbeat_s: float = DEFAULT_HEARTBEAT_S
    write_timeout_s: float = DEFAULT_WRITE_TIMEOUT_S
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S
    sndbuf: int | None = None
    sample_queues: bool = False
    access_log: bool = True

    def __post_init__(self) -> None:
        for name in ("heartbeat_s", "write_timeout_s", "request_timeout_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 86_400:
                raise ValueError(f"{name} must be a number of seconds above 0 and below a day, got {value!r}")


@dataclass(frozen=True, slots=True)
class ConnectionLog:
    """One finished event-stream connection, as the server saw it.

    last_event_id_header: the ``Last-Event-ID`` header sent (None if
    absent); cursor: the exclusive resume cursor used; tokens_sent: token
    frames handed to the kernel; generated: tokens in the log when the
    connection ended (-1: the log no longer held the stream, it was
    evicted under the connection); failure: why the wire declared the peer gone; stats:
    the connection's channel statistics.
    """

    stream_id: str
    last_event_id_header: str | None
    last_event_id_query: str | None
    cursor: int
    cut_after: int | None
    ending: Ending
    tokens_sent: int
    bytes_sent: int
    generated: int
    failure: str | None
    stats: ChannelStats


class RequestError(Exception):
    """A request the live endpoints refuse: ``status`` and a message that quotes the bad value."""

    def __init__(self, status: int, message: str, headers: tuple[tuple[str, str], ...] = ()) -> None:
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers


# -- requests -> streams (pure) ----------------------------------------------
# More query fields than any request here needs (nine report parameters and two live ones).
MAX_QUERY_FIELDS = 64


def echo(value: str) -> str:
    """Return ``repr(value)``, shortened past ``MAX_ECHO_CHARS`` (with the full length said)."""
    if len(value) <= MAX_ECHO_CHARS:
        return repr(value)
    return f"{value[:MAX_ECHO_CHARS]!r}... ({len(value)} characters)"


def split_query(query: str) -> tuple[str, dict[str, str]]:
    """Return the report part of ``query`` and the live-only parameters; raises ``RequestError``."""
    rest: list[tuple[str, str]] = []
    live: dict[str, str] = {}
    try:
        pairs = parse_qsl(query, keep_blank_values=True, max_num_fields=MAX_QUERY_FIELDS)
    except ValueError:
        raise RequestError(400, f"query string has more than {MAX_QUERY_FIELDS} parameters") from None
    for name, value in pairs:
        if name not in LIVE_PARAMS:
            rest.append((name, value))
        elif name in live:
            raise RequestError(400, f"parameter {name!r} given more than once ({echo(live[name])} and "
                                    f"{echo(value)}); give it once")
        else:
            live[name] = value
    return urlencode(rest), live


def parse_count(name: str, value: str) -> int:
    """Return ``value`` as a non-negative decimal int; raises ``RequestError`` naming ``name``."""
    if len(value) > MAX_ID_DIGITS or not value.isascii() or not _DECIMAL.fullmatch(value):
        raise RequestError(400, f"{name} must be a decimal integer without sign or leading zeros "
                                f"(at most {MAX_ID_DIGITS} digits), got {echo(value)}")
    return int(value)


def utf8(raw: str) -> str:
    """Return text ``http.server`` decoded as Latin-1 (request line, headers) decoded as UTF-8 instead.

    Bytes that are not UTF-8 become U+FFFD, so a message can quote them.
    """
    return raw.encode("latin-1", "replace").decode("utf-8", "replace")


def header_text(raw: str) -> str:
    """Return a header value as its sender wrote it: UTF-8, without the whitespace HTTP allows around it."""
    return utf8(raw).strip(" \t")


def unknown_stream_message(stream_id: str) -> str:
    """The 404 a stream id the token log does not hold gets (also after a restart: the log was in memory)."""
    return (f"unknown stream {stream_id!r}: never created here, evicted from the token log (too old or too many "
            f"streams), or lost when the server restarted; start a new one with POST /streams")


def cut_range_message(tokens: int, value: str) -> str:
    """The 400 for a live ``cut_after`` outside 1..tokens-1 (a cut needs a token before it and one after)."""
    if tokens < 2:
        return (f"cut_after needs an answer of at least 2 tokens (one before the cut, one after); "
                f"got {value!r} with tokens={tokens}")
    return f"cut_after must be from 1 to {tokens - 1} (tokens-1), got {value!r}"


def spec_from_query(query: str) -> tuple[RunSpec, int | None]:
    """Return the stream spec and ``cut_after`` a create request asks for; raises ``RequestError``."""
    rest, live = split_query(query)
    if "last_event_id" in live:
        raise RequestError(400, "last_event_id applies to /streams/<id>/events, not to a new stream")
    try:
        spec = spec_from_params(parse_query(rest))
    except (ParamError, ValueError) as exc:
        raise RequestError(400, str(exc)) from None
    cut = parse_count("cut_after", live["cut_after"]) if "cut_after" in live else None
    if cut is not None and not 0 < cut < spec.tokens:
        raise RequestError(400, cut_range_message(spec.tokens, live["cut_after"]))
    return spec, cut


# The report's scenarios, as the policy of a live stream.  ``baseline`` and
# ``disconnect`` are the report's fast-reader and hang-up-and-resume
# sections, both on a ``block`` channel; live, the reader's speed is the
# real client's and the hang-up is ``cut_after``.
_POLICY_OF_SCENARIO = {"baseline": Policy.BLOCK, "block": Policy.BLOCK, "drop-newest": Policy.DROP_NEWEST,
                       "drop-oldest": Policy.DROP_OLDEST, "disconnect": Policy.BLOCK}


def spec_from_params(params: ReportParams) -> RunSpec:
    """Return the ``RunSpec`` of a live stream for the report's parameters.

    Only the producer side is taken (answer length, policy from the
    scenario, buffer, producer pace, seed): the reader is the real client,
    so ``reader_ms``, ``clock`` and ``format`` do not apply, and the report's
    default ``cut_after`` is not a cut (a live cut is asked for explicitly).
    """
    return RunSpec(tokens=params.tokens, policy=_POLICY_OF_SCENARIO[params.scenario], capacity=params.buffer,
                   producer_ms=params.producer_ms, seed=params.seed)


def resume_cursor(header: str | None, query_value: str | None, total: int, generated: int) -> int:
    """Return the exclusive cursor a connection asks for (-1: from the start).

    The header wins over the query parameter.  Raises ``RequestError`` 400
    for a malformed id or one the stream has not generated.
    """
    source, value = ("Last-Event-ID", header) if header is not None else ("last_event_id", query_value)
    if value is None or value == "":
        return -1
    cursor = parse_count(source, value)
    if cursor >= total:
        raise RequestError(400, f"{source} {value!r} is past the end: this stream has ids 0..{total - 1}")
    if cursor >= generated:
        so_far = f"ids 0..{generated - 1} so far" if generated else "no ids yet"
        raise RequestError(400, f"{source} {value!r} was never sent: this stream has generated {so_far}")
    return cursor


# -- the server ------------------------------------------------------------------
class LiveServer(ThreadingHTTPServer):
    """``ThreadingHTTPServer`` with a registry, the live config and a journal of finished connections."""

    daemon_threads = True
    request_queue_size = REQUEST_QUEUE_SIZE

    def __init__(self, address: tuple[str, int], *, registry: Registry | None = None,
                 config: LiveConfig | None = None) -> None:
        self.registry = registry if registry is not None else Registry()   # an empty Registry is falsy
        self.config = config if config is not None else LiveConfig()
        self.journal: deque[ConnectionLog] = deque(maxlen=JOURNAL_SIZE)
        self.wires: dict[str, SocketWire] = {}     # latest wire per stream, kept only when sampling
        self.clock: RealClock = self.registry.clock
        super().__init__(address, LiveHandler)

    @property
    def address(self) -> tuple[str, int]:
        """The ``(host, port)`` actually bound (port 0 resolved)."""
        host, port = self.socket.getsockname()[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        """The base URL, with the port actually bound."""
        host, port = self.address
        return f"http://{host}:{port}"


def make_server(host: str = "127.0.0.1", port: int = 0, *, registry: Registry | None = None,
                config: LiveConfig | None = None) -> LiveServer:
    """Bind a ``LiveServer`` (port 0 picks a free one); raises ``OSError`` if it cannot bind."""
    return LiveServer((host, port), registry=registry, config=config)


_TEMPLATES = jinja2.Environment(
    loader=jinja2.PackageLoader("tokenwire", "templates"),
    autoescape=jinja2.select_autoescape(["html"]), undefined=jinja2.StrictUndefined,
    trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
)


class _DeadlineReader(io.RawIOBase):
    """A socket read under one deadline for a whole request: each ``recv`` may wait only for what is left.

    A plain socket timeout restarts on every byte, so a client trickling one
    byte just inside it would hold its thread forever; this one does not.
    """

    def __init__(self, sock: socket.socket) -> None:
        super().__init__()
        self.sock = sock
        self.deadline = time.monotonic()
        self.timeout_s = 0.0

    def start(self, timeout_s: float) -> None:
        """Give the next request ``timeout_s`` from now to arrive whole."""
        self.deadline, self.timeout_s = time.monotonic() + timeout_s, timeout_s

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"the request did not arrive whole within {self.timeout_s:g} s")
        self.sock.settimeout(left)
        return self.sock.recv_into(buffer)


def allowed_methods(path: str) -> str | None:
    """Return the ``Allow`` value of a served ``path``, None for a path this server does not serve."""
    if path == "/streams":
        return _ALLOW_STREAMS
    if path == "/stream" or _EVENTS_PATH.fullmatch(path):
        return _ALLOW_GET
    if path == "/live" or path in REPORT_PATHS or (path.startswith("/static/") and path[8:] in _STATIC):
        return _ALLOW_PAGE
    return None


class LiveHandler(handler):
    """The report handler plus ``/streams``, ``/stream``, ``/live`` and ``/static``."""

    server: LiveServer
    _streaming = False       # True once an event stream's headers are out

    def setup(self) -> None:
        # Slowloris: the request's reads share one deadline (``_DeadlineReader``);
        # the stream's writes get their own timeout once the request is parsed.
        super().setup()
        self.rfile.close()                       # the stdlib's reader; the socket stays open
        self._reader = _DeadlineReader(self.connection)
        self.rfile = io.BufferedReader(self._reader)

    def handle_one_request(self) -> None:
        self._reader.start(self.server.config.request_timeout_s)
        super().handle_one_request()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the stdlib's name)
        if self.server.config.access_log:
            super().log_message(format, *args)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The standard library's own errors (bad request line, 414, 431, 501), with this server's headers."""
        self.close_connection = True
        if self.request_version == "HTTP/0.9":
            self.request_version = "HTTP/1.0"   # http.server would answer a bad line with a bare body
        self.log_error("code %d, message %s", code, message)
        text = f"{code} {message or self.responses.get(code, ('error',))[0]}\n"
        self._reply(code, "text/plain; charset=utf-8", text.encode("utf-8", "replace"),
                    (("Connection", "close"), ("Cache-Control", "no-store")))

    def parse_request(self) -> bool:
        if not super().parse_request():
            return False
        if self.request_version == "HTTP/0.9":   # no headers at all: no CSP, no nosniff, no Content-Length
            self.send_error(400, "HTTP/0.9 requests are not served; send HTTP/1.0 or HTTP/1.1")
            return False
        # The target's bytes as UTF-8 (http.server read them as Latin-1), so a
        # raw non-ASCII character is quoted back as the client sent it.
        self.path = utf8(self.path)
        if len(self.requestline) > MAX_REQUEST_LINE:
            self.close_connection = True
            self._error(414, f"request line longer than {MAX_REQUEST_LINE} bytes")
            return False
        if sum(len(k) + len(v) + 4 for k, v in self.headers.items()) > MAX_HEADER_BYTES:
            self.close_connection = True
            self._error(431, f"request headers longer than {MAX_HEADER_BYTES} bytes")
            return False
        # The answer's writes get the write timeout, not what is left of the
        # request's deadline (reads of a body still set their own).
        self.connection.settimeout(self.server.config.write_timeout_s)
        return True

    # -- routing -----------------------------------------------------------
    def do_GET(self) -> None:
        path, _, query = self.path.partition("?")
        try:
            if path == "/live":
                self._live_page()
            elif path.startswith("/static/"):
                self._static(path[len("/static/"):])
            elif path == "/stream":
                spec, cut = spec_from_query(query)
                self._last_event_id(created=True)      # refused before a stream is made for nothing
                self._events(self.server.registry.create(spec, cut_after=cut), query, created=True)
            elif (match := _EVENTS_PATH.fullmatch(path)) is not None:
                self._events(self._lookup(match.group(1)), query, created=False)
            elif path == "/streams":
                self._not_allowed()            # POST /streams creates a stream
            else:
                super().do_GET()
        except RequestError as exc:
            self._error(exc.status, exc.message, exc.headers)
        except LogError as exc:
            self._log_failure(exc)

    def do_HEAD(self) -> None:
        path = self.path.partition("?")[0]
        if path == "/live" or path.startswith("/static/"):
            self.do_GET()                      # _reply leaves the body out for HEAD
        elif path == "/stream" or path == "/streams" or _EVENTS_PATH.fullmatch(path):
            self._not_allowed()
        else:
            super().do_HEAD()

    def _not_allowed(self) -> None:
        """Any method a path does not take: 405 with its ``Allow``, or 404 for a path not served."""
        path = self.path.partition("?")[0]
        self.close_connection = True           # a body may follow that nobody reads
        allow = allowed_methods(path)
        if allow is None:
            self._send(respond("GET", self.path))   # the same 404 as a GET of it
        elif path in REPORT_PATHS:
            super()._not_allowed()             # the report's own 405
        else:
            self._error(405, f"{echo(path)} does not take {self.command}; it takes {allow}", (("Allow", allow),))

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _not_allowed  # noqa: N815

    def _log_failure(self, exc: LogError) -> None:
        if self._streaming:       # headers already sent: all that is left is to end the stream
            self.log_error("token log failed mid-stream: %s", exc)
            return
        if isinstance(exc, UnknownStream):
            self._error(404, unknown_stream_message(exc.stream_id))
        elif isinstance(exc, LogGap):
            self._error(410, str(exc))
        elif isinstance(exc, LogUnavailable):
            self._error(503, str(exc), (("Retry-After", str(RETRY_AFTER_S)),))
        else:
            raise exc

    def do_POST(self) -> None:
        path, _, query = self.path.partition("?")
        if path != "/streams":
            self._not_allowed()
            return
        try:
            self._discard_body()
            spec, cut = spec_from_query(query)
            live = self.server.registry.create(spec, cut_after=cut)
            url = f"/streams/{live.stream_id}/events"
            body = json.dumps({"stream_id": live.stream_id, "events_url": url}).encode()
            self._reply(201, "application/json", body, (("Location", url), ("Cache-Control", "no-store")))
        except RequestError as exc:
            self._error(exc.status, exc.message, exc.headers)
        except LogError as exc:
            self._log_failure(exc)

    def _lookup(self, stream_id: str) -> LiveStream:
        try:
            return self.server.registry.get(stream_id)
        except UnknownStream:
            raise RequestError(404, unknown_stream_message(stream_id)) from None

    def _discard_body(self) -> None:
        if "Transfer-Encoding" in self.headers:
            self.close_connection = True
            raise RequestError(411, "send the parameters in the query string; chunked bodies are refused")
        length = self.headers.get("Content-Length", "0")
        size = parse_count("Content-Length", length)
        if size > MAX_BODY_BYTES:
            self.close_connection = True
            raise RequestError(413, f"request body of {size} bytes; at most {MAX_BODY_BYTES} are read")
        if size:
            self.rfile.read(size)

    # -- replies -------------------------------------------------------------
    def _reply(self, status: int, content_type: str, body: bytes,
               headers: tuple[tuple[str, str], ...] = ()) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (*_SECURITY_HEADERS, *headers):
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _error(self, status: int, message: str, headers: tuple[tuple[str, str], ...] = ()) -> None:
        body = json.dumps({"error": message}).encode()
        self._reply(status, "application/json", body, (("Cache-Control", "no-store"), *headers))

    def _live_page(self) -> None:
        config = self.server.config
        body = _TEMPLATES.get_template("live.html").render(
            heartbeat_s=f"{config.heartbeat_s:g}", live_params=", ".join(LIVE_PARAMS)).encode()
        self._reply(200, "text/html; charset=utf-8", body,
                    (("Content-Security-Policy", LIVE_CSP), ("Cache-Control", "no-store")))

    def _static(self, name: str) -> None:
        content_type = _STATIC.get(name)
        if content_type is None:
            raise RequestError(404, f"no static file {name!r}")
        body = resources.files("tokenwire").joinpath("static", name).read_bytes()
        self._reply(200, content_type, body, (("Cache-Control", "no-cache"),))

    # -- the event stream ------------------------------------------------------
    def _events(self, live: LiveStream, query: str, *, created: bool) -> None:
        rest, params = split_query(query)
        if not created and rest:
            raise RequestError(400, f"an events URL takes only last_event_id and cut_after, got {rest!r}")
        stream = live.stream
        header = self._last_event_id(created)
        generated = self.server.registry.log.length(stream.stream_id)
        cursor = resume_cursor(header, params.get("last_event_id"), stream.total, generated)
        requested = parse_count("cut_after", params["cut_after"]) if "cut_after" in params and not created else None
        if requested is not None and not 0 < requested < stream.total:
            raise RequestError(400, cut_range_message(stream.total, params["cut_after"]))
        self.server.registry.log.read_after(stream.stream_id, cursor, 0)   # LogGap now, while a status can say so
        if cursor == stream.total - 1:
            self.close_connection = True
            self._reply(204, "text/plain; charset=utf-8", b"", (("Cache-Control", "no-store"),))
            return
        try:
            with self.server.registry.connection():
                self._write_stream(live, cursor, live.take_cut(requested), header, params.get("last_event_id"))
        except Busy as exc:
            self.close_connection = True
            raise RequestError(503, str(exc), (("Retry-After", str(RETRY_AFTER_S)),)) from None

    def _last_event_id(self, created: bool) -> str | None:
        values = self.headers.get_all("Last-Event-ID") or []
        if len(values) > 1:
            raise RequestError(400, f"Last-Event-ID given {len(values)} times; send it once")
        if not values:
            return None
        if created and values[0].strip(" \t"):
            raise RequestError(400, "Last-Event-ID resumes a stream at /streams/<id>/events; GET /stream starts "
                                    "a new one (its open event names the id)")
        return header_text(values[0])

    def _write_stream(self, live: LiveStream, cursor: int, cut: int | None,
                      header: str | None, query_id: str | None) -> None:
        server, stream = self.server, live.stream
        self.close_connection = True
        self.send_response(200)
        for name, value in (*_SSE_HEADERS, *_SECURITY_HEADERS):
            self.send_header(name, value)
        self.end_headers()
        self._streaming = True
        sock: socket.socket = self.connection
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if server.config.sndbuf is not None:
            shrink_buffers(sock, sndbuf=server.config.sndbuf)
        wire = SocketWire(sock, write_timeout_s=server.config.write_timeout_s, sample=server.config.sample_queues)
        if server.config.sample_queues:
            server.wires[stream.stream_id] = wire
            while len(server.wires) > JOURNAL_SIZE:      # bounded like the journal
                server.wires.pop(next(iter(server.wires)))
        channel = stream.new_channel()
        writer = stream.serve(cursor, channel, cut_after=cut,
                              heartbeat_ns=round(server.config.heartbeat_s * 1e9))
        ending = run_process(writer, server.clock, wire, server.registry.spawn)
        try:
            generated = server.registry.log.length(stream.stream_id)
        except UnknownStream:
            generated = -1
        server.journal.append(ConnectionLog(
            stream.stream_id, header, query_id, cursor, cut, ending, wire.snapshot()[1], wire.bytes_sent,
            generated, wire.failure, channel.stats()))


# -- the command -------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tokenwire serve", description=(
        "Serve the report and the live SSE endpoints (POST /streams, GET /streams/<id>/events, "
        "GET /stream, GET /live)."))
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port to bind, 0 for any free one (default 8000)")
    parser.add_argument("--heartbeat-s", type=float, default=DEFAULT_HEARTBEAT_S,
                        help=f"send ': ping' on a stream silent this long (default {DEFAULT_HEARTBEAT_S:g})")
    parser.add_argument("--write-timeout-s", type=float, default=DEFAULT_WRITE_TIMEOUT_S,
                        help=f"drop a client that takes nothing for this long (default {DEFAULT_WRITE_TIMEOUT_S:g})")
    parser.add_argument("--request-timeout-s", type=float, default=DEFAULT_REQUEST_TIMEOUT_S,
                        help=f"drop a client that sends no request for this long (default {DEFAULT_REQUEST_TIMEOUT_S:g})")
    parser.add_argument("--max-live", type=int, default=DEFAULT_MAX_LIVE,
                        help=f"open event streams at once; more get 503 (default {DEFAULT_MAX_LIVE})")
    parser.add_argument("--max-streams", type=int, default=DEFAULT_MAX_STREAMS,
                        help=f"streams kept for resume; past it the least recently written is evicted "
                             f"(default {DEFAULT_MAX_STREAMS})")
    parser.add_argument("--max-age-s", type=int, default=DEFAULT_MAX_AGE_NS // 1_000_000_000,
                        help=f"seconds a stream is kept for resume, in the in-memory log "
                             f"(default {DEFAULT_MAX_AGE_NS // 1_000_000_000}; a Redis log has its own TTL)")
    parser.add_argument("--quiet", action="store_true", help="no access log on stderr")
    parser.add_argument("--log", default=None, metavar="URL",
                        help="token log: 'memory' or redis://host:port/db to share streams between instances "
                             "(default $TOKENWIRE_LOG_URL, else memory)")
    return parser


_FLAGS = ("heartbeat_s", "write_timeout_s", "request_timeout_s", "max_live", "max_streams", "max_age_s")


def _flag_message(message: str) -> str:
    """Name a setting as its flag (``--max-live``), as the person who typed it knows it."""
    for name in _FLAGS:
        if message.startswith(name + " "):
            return "--" + name.replace("_", "-") + message[len(name):]
    return message


def cli_main(argv: list[str]) -> int:
    """Run ``tokenwire serve``; returns the exit status (2 for bad usage, 1 if it cannot bind)."""
    args = _parser().parse_args(argv)
    if not 0 <= args.port <= 65535:
        print(f"tokenwire serve: --port must be from 0 to 65535, got {args.port!r}", file=sys.stderr)
        return 2
    try:
        config = LiveConfig(heartbeat_s=args.heartbeat_s, write_timeout_s=args.write_timeout_s,
                            request_timeout_s=args.request_timeout_s, access_log=not args.quiet)
        if not 0 < args.max_age_s <= 86_400 * 365:
            raise ValueError(f"max_age_s must be from 1 to {86_400 * 365} seconds, got {args.max_age_s!r}")
        from .shared import make_registry     # the token log: --log, $TOKENWIRE_LOG_URL, or memory
        registry = make_registry(args.log, max_live=args.max_live, max_streams=args.max_streams,
                                 max_age_ns=args.max_age_s * 1_000_000_000)
    except ValueError as exc:
        print(f"tokenwire serve: {_flag_message(str(exc))}", file=sys.stderr)
        return 2
    try:
        server = make_server(args.host, args.port, registry=registry, config=config)
    except OSError as exc:
        print(f"tokenwire serve: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    with server:
        print(f"tokenwire serving on {server.url}/  (live page: {server.url}/live; Ctrl-C stops)", flush=True)
        server.serve_forever()
    return 0
