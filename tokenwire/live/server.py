"""``tokenwire serve``: the report handler plus the live SSE endpoints, on real sockets.

How this works: ``LiveServer`` is a ``ThreadingHTTPServer`` that gives each
connection its own daemon thread running ``LiveHandler``
(``routes``), and holds what the connections share: the
registry of streams (and through it the token log), the ``LiveConfig``
(``config``) and a bounded journal of finished connections.
``cli_main`` is the command; its flags are the config's settings and the
registry's limits.

Routes (the README lists the status codes):

- ``POST /streams?<report parameters>[&cut_after=k]`` -> 201 JSON
  ``{"stream_id", "events_url"}``.
- ``GET /streams/<id>/events[?last_event_id=n][&cut_after=k]`` -> the SSE
  stream.  The ``Last-Event-ID`` header wins over ``?last_event_id=``
  (``params`` reads both).
- ``GET /stream?<report parameters>[&cut_after=k]`` -> create and stream in
  one request (for ``curl -N``).
- ``GET /live`` and ``GET /static/live.{js,css}`` -> the EventSource page.

The last index of a finished stream means "I have it all": 204, which tells
an ``EventSource`` to stop reconnecting.  A stream the token log no longer
holds (evicted for age or count, or made by a server process that has since
restarted, with the in-memory log) is a 404 that says so; a cursor before
the first token the log still keeps is a 410.  Neither is ever a silent
restart of the stream.
"""

from __future__ import annotations

import argparse
import sys
from collections import deque
from http.server import ThreadingHTTPServer

from ..core.clock import RealClock
from ..core.tokenlog import DEFAULT_MAX_AGE_NS, DEFAULT_MAX_STREAMS
from .config import (
    DEFAULT_HEARTBEAT_S,
    DEFAULT_REQUEST_TIMEOUT_S,
    DEFAULT_WRITE_TIMEOUT_S,
    JOURNAL_SIZE,
    MAX_BODY_BYTES,
    MAX_HEADER_BYTES,
    MAX_REQUEST_LINE,
    REQUEST_QUEUE_SIZE,
    RETRY_AFTER_S,
    ConnectionLog,
    LiveConfig,
)
from .routes import LIVE_CSP, LiveHandler
from .params import MAX_ECHO_CHARS, MAX_ID_DIGITS, MAX_QUERY_FIELDS, spec_from_query
from .registry import DEFAULT_MAX_LIVE, Registry
from .sockets import SocketWire

# What this module defines, and the names callers (tests, the demo, bench)
# import from here although they live next door.
__all__ = [
    "DEFAULT_HEARTBEAT_S",
    "DEFAULT_MAX_AGE_NS",
    "DEFAULT_MAX_LIVE",
    "DEFAULT_MAX_STREAMS",
    "DEFAULT_REQUEST_TIMEOUT_S",
    "DEFAULT_WRITE_TIMEOUT_S",
    "JOURNAL_SIZE",
    "LIVE_CSP",
    "MAX_BODY_BYTES",
    "MAX_ECHO_CHARS",
    "MAX_HEADER_BYTES",
    "MAX_ID_DIGITS",
    "MAX_QUERY_FIELDS",
    "MAX_REQUEST_LINE",
    "REQUEST_QUEUE_SIZE",
    "RETRY_AFTER_S",
    "ConnectionLog",
    "LiveConfig",
    "LiveHandler",
    "LiveServer",
    "cli_main",
    "make_server",
    "spec_from_query",
]



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
                        help=f"drop a client that sends no request for this long "
                             f"(default {DEFAULT_REQUEST_TIMEOUT_S:g})")
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
        from .shared_stream import make_registry     # the token log: --log, $TOKENWIRE_LOG_URL, or memory
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
