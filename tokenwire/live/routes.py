"""The live server's HTTP handler: ``LiveHandler`` routes the live endpoints and guards every request.

How this works: ``LiveHandler`` subclasses the report ``handler`` and adds
the routes a serverless function cannot hold open; every other path falls
back to ``super().do_GET()``.  Each request is parsed by
``params`` (a refusal is a ``RequestError``, answered as JSON
``{"error": ...}``); an event stream's writer process (``Stream.serve``)
runs on the connection's own thread through ``run_process`` with a
``SocketWire``: a ``Send`` is a ``sendall`` under the write timeout, a
silent stream gets a ``: ping`` comment every ``heartbeat_s``, and a peer
that is gone makes the writer disconnect, which cancels the producer (it
runs on its own thread, started by the registry).  Each finished stream is
written to the server's journal (``ConnectionLog``).

Every method on every path has one answer: a path that is not served is a
404 whatever the method, a served path asked with the wrong method a 405
with ``Allow``.  A request has ``request_timeout_s`` in total to arrive
(request line, headers and body), however slowly its bytes trickle in
(``_DeadlineReader``), so a slowloris client holds a thread for at most that
long.  Errors the standard library raises while parsing (bad request line,
414, 431, 501) carry the same security headers as every other answer.
"""

from __future__ import annotations

import io
import json
import re
import socket
import time
from importlib import resources
from collections import deque
from typing import Any, Protocol

import jinja2

from ..core.threads import run_process
from ..core.tokenlog import LogError, LogGap, LogUnavailable, UnknownStream
from ..handler import REPORT_PATHS, handler, respond
from .config import JOURNAL_SIZE, LiveConfig, MAX_BODY_BYTES, MAX_HEADER_BYTES, MAX_REQUEST_LINE, RETRY_AFTER_S, ConnectionLog
from .params import (
    LIVE_PARAMS,
    RequestError,
    cut_range_message,
    echo,
    header_text,
    parse_count,
    resume_cursor,
    spec_from_query,
    split_query,
    unknown_stream_message,
    utf8,
)
from .registry import Busy, LiveStream, Registry
from .sockets import SocketWire, shrink_buffers


__all__ = ["LIVE_CSP", "LiveHandler", "allowed_methods"]

_EVENTS_PATH = re.compile(r"/streams/([A-Za-z0-9_-]{1,64})/events")
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


class ServerState(Protocol):
    """What a handler reads of its server (``LiveServer`` is one)."""

    registry: Registry
    config: LiveConfig
    journal: deque[ConnectionLog]
    wires: dict[str, SocketWire]
    clock: Any


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

    server: ServerState  # type: ignore[assignment]
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
            heartbeat_s=f"{config.heartbeat_s:g}", live_params=", ".join(LIVE_PARAMS),
            retry_after_s=RETRY_AFTER_S).encode()
        self._reply(200, "text/html; charset=utf-8", body,
                    (("Content-Security-Policy", LIVE_CSP), ("Cache-Control", "no-store")))

    def _static(self, name: str) -> None:
        content_type = _STATIC.get(name)
        if content_type is None:
            raise RequestError(404, f"no static file {name!r}")
        body = resources.files("tokenwire.live").joinpath("static", name).read_bytes()
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
