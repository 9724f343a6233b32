"""``tokenwire serve``: its flags, the token log they choose, the one logger, and the banner.

How this works: the flags map onto ``LiveConfig`` and the registry's limits
(a bad value is one line naming the flag, exit 2, as every subcommand's);
``--log`` (or ``$TOKENWIRE_LOG_URL``) picks the token log; the ``tokenwire``
logger gets one handler on stderr (``--quiet`` keeps errors only): access
lines carry the time, everything else says ``tokenwire serve:``.  Then the
server binds, prints where it listens, and serves until SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import resource
import sys
import time

from ..cli import FlagParser, usage_error
from ..core.tokenlog import DEFAULT_MAX_AGE_NS, DEFAULT_MAX_STREAMS
from ..endpoints.config import (
    DEFAULT_GRACE_S,
    DEFAULT_HEARTBEAT_S,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_REQUEST_TIMEOUT_S,
    DEFAULT_WRITE_TIMEOUT_S,
    MAX_BODY_BYTES,
    MAX_CHAT_BODY_BYTES,
    MAX_DURATION_ENV,
    LiveConfig,
    max_duration_setting,
)
from ..endpoints.registry import DEFAULT_CREATE_BURST, DEFAULT_CREATE_RATE, DEFAULT_MAX_LIVE, Registry
from ..endpoints.routes import LIVE_ROUTES
from ..realtime import loop_name
from .server import LiveServer, make_server

__all__ = ["add_stream_flags", "beyond_loopback", "cannot_listen", "check_port", "cli_main", "configure_logging",
           "raise_fd_limit"]


class _ServeFormat(logging.Formatter):
    """Access lines as ``HH:MM:SS <line>``; anything else as ``tokenwire <command>: <message>``."""

    def __init__(self, command: str) -> None:
        super().__init__()
        self.command = command

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if record.name == "tokenwire.access":
            return f"{time.strftime('%H:%M:%S')} {message}"
        return f"tokenwire {self.command}: {message}"


def configure_logging(quiet: bool, command: str = "serve") -> None:
    """Send the ``tokenwire`` logger to stderr, one line a record, each named by ``command``; ``quiet``: errors only."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_ServeFormat(command))
    root = logging.getLogger("tokenwire")
    root.handlers[:] = [handler]
    root.propagate = False
    root.setLevel(logging.ERROR if quiet else logging.INFO)


def raise_fd_limit() -> int:
    """Raise this process's soft file-descriptor limit to its hard limit; returns the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY else soft, hard))
        except (ValueError, OSError):
            return soft
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


# -- the command -------------------------------------------------------------------
def check_port(port: int) -> None:
    """Raise ``ValueError`` for a ``--port`` (of ``add_stream_flags``) no socket can bind."""
    if not 0 <= port <= 65535:
        raise ValueError(f"port must be from 0 to 65535, got {port!r}")


def log_checked(command: str, log: object) -> bool:
    """Ask the token log whether it can run here (``RedisTokenLog.check``); False, said in one line on stderr,
    if Redis refuses its user a command it needs.  A Redis that does not answer is said, and it starts anyway."""
    from ..redislog.acl import NotPermitted  # no redis import: serve runs without the extra
    try:
        problem = getattr(log, "check", lambda: None)()
    except NotPermitted as exc:
        print(f"tokenwire {command}: {exc}; not starting", file=sys.stderr, flush=True)
        return False
    if problem:
        print(f"tokenwire {command}: {problem}", file=sys.stderr, flush=True)
    return True


def cannot_listen(command: str, host: str, port: int, exc: OSError) -> int:
    """Say on stderr that ``tokenwire <command>`` cannot listen on ``host``:``port``, and why; returns 1.

    The why is the system's word for the error (the resolver's, for a host name that does not resolve):
    ``socket.create_server`` raises a copy of its ``bind``'s error whose message says the address again, with
    that error as its context.
    """
    cause = exc.__context__ if isinstance(exc.__context__, OSError) else exc
    reason = os.strerror(cause.errno) if cause.errno and cause.errno > 0 else cause.strerror or str(cause)
    print(f"tokenwire {command}: cannot listen on {host}:{port}: {reason}", file=sys.stderr, flush=True)
    return 1


def add_stream_flags(parser: FlagParser, *, serve: bool = False) -> None:
    """The flags of every command that serves the live routes (``serve``, ``proxy``): where, the limits, the log.

    ``serve``: with the flags of tokenwire's own server too (the memory log's age, metrics).
    """
    add = parser.add_argument
    add("--host", default="127.0.0.1", help="address to bind, IPv4 or IPv6 (default 127.0.0.1)")
    add("--port", type=int, default=8000, help="port to bind, 0 for any free one (default 8000)")
    add("--heartbeat-s", type=float, default=DEFAULT_HEARTBEAT_S,
        help=f"send ': ping' on a stream silent this long (default {DEFAULT_HEARTBEAT_S:g})")
    add("--write-timeout-s", type=float, default=DEFAULT_WRITE_TIMEOUT_S,
        help=f"drop a client that takes nothing for this long (default {DEFAULT_WRITE_TIMEOUT_S:g})")
    add("--request-timeout-s", type=float, default=DEFAULT_REQUEST_TIMEOUT_S,
        help=f"drop a client whose request has not arrived whole in this long, or an idle connection "
             f"(default {DEFAULT_REQUEST_TIMEOUT_S:g})")
    add("--max-live", type=int, default=DEFAULT_MAX_LIVE,
        help=f"open event streams at once; more get 503 (default {DEFAULT_MAX_LIVE})")
    add("--max-connections", type=int, default=DEFAULT_MAX_CONNECTIONS,
        help=f"open connections at once; more get an immediate 503 (default {DEFAULT_MAX_CONNECTIONS})")
    add("--max-streams", type=int, default=DEFAULT_MAX_STREAMS,
        help=f"streams kept for resume; past it one is evicted, never-read and finished ones first "
             f"(default {DEFAULT_MAX_STREAMS})")
    if serve:
        add("--max-age-s", type=int, default=DEFAULT_MAX_AGE_NS // 1_000_000_000,
            help=f"seconds a stream is kept for resume, in the in-memory log "
                 f"(default {DEFAULT_MAX_AGE_NS // 1_000_000_000}; a Redis log has its own TTL)")
    add("--create-burst", type=int, default=DEFAULT_CREATE_BURST,
        help=f"streams one client address may create at once; more get 429 (default {DEFAULT_CREATE_BURST})")
    add("--create-rate", type=float, default=DEFAULT_CREATE_RATE,
        help=f"streams per second a client's allowance refills (default {DEFAULT_CREATE_RATE:g})")
    add("--grace-s", type=float, default=DEFAULT_GRACE_S,
        help=f"on SIGTERM/SIGINT, let open streams run to their end this long (default {DEFAULT_GRACE_S:g})")
    add("--max-duration-s", type=float, default=None,
        help=f"end each event-stream connection after this long, at a frame boundary; the reader resumes at "
             f"once (default ${MAX_DURATION_ENV}, else no limit)")
    add("--max-body-bytes", type=int, default=MAX_BODY_BYTES,
        help=f"the most a POST /streams body may carry; more gets 413 (default {MAX_BODY_BYTES})")
    add("--max-chat-body-bytes", type=int, default=MAX_CHAT_BODY_BYTES,
        help=f"the most a POST /chat body (the whole conversation) may carry; more gets 413 "
             f"(default {MAX_CHAT_BODY_BYTES})")
    add("--quiet", action="store_true", help="no access log on stderr")
    if serve:
        add("--no-metrics", action="store_true",
            help="count nothing for GET /metrics, which then answers 404 (default: counted; the scrape needs "
                 "pip install 'tokenwire[metrics]')")
    add("--log", default=None, metavar="URL",
        help="token log: 'memory' or redis://host:port/db to share streams between instances "
             "(default $TOKENWIRE_LOG_URL, else memory)")


def _parser() -> FlagParser:
    parser = FlagParser("tokenwire serve", (
        "Serve the report and the live SSE endpoints (POST /streams, GET /streams/<id>/events, "
        "GET /stream, GET /live) on one event loop."))
    add_stream_flags(parser, serve=True)
    return parser


def _setup(args: argparse.Namespace) -> tuple[LiveConfig, Registry]:
    config = LiveConfig(heartbeat_s=args.heartbeat_s, write_timeout_s=args.write_timeout_s,
                        request_timeout_s=args.request_timeout_s, access_log=not args.quiet,
                        max_connections=args.max_connections, grace_s=args.grace_s,
                        max_duration_s=max_duration_setting(args.max_duration_s))
    if not 0 < args.max_age_s <= 86_400 * 365:
        raise ValueError(f"max_age_s must be from 1 to {86_400 * 365} seconds, got {args.max_age_s!r}")
    from ..endpoints.logs import make_registry  # the token log: --log, $TOKENWIRE_LOG_URL, or memory
    registry = make_registry(args.log, max_live=args.max_live, max_streams=args.max_streams,
                             max_age_ns=args.max_age_s * 1_000_000_000, create_burst=args.create_burst,
                             create_rate=args.create_rate)
    return config, registry


def open_warning(command: str, also: str = "") -> str:
    """What ``tokenwire <command>``'s banner says when it listens beyond loopback: it asks nobody who they are."""
    return (f"open to anyone who can reach it: tokenwire {command} has no authorization (whoever holds a stream's "
            f"id reads it{also}); put TokenStreams(authorize=...) in front of real users")


def beyond_loopback(host: str) -> bool:
    """True if a server bound to ``host`` is reachable from other machines (anything but 127/8, ::1)."""
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host != "localhost"


def _banner(server: LiveServer) -> str:
    log = server.registry.log
    where = getattr(log, "describe", lambda: "memory (this process only)")()
    warning = f"\n{open_warning('serve')}" if beyond_loopback(server.address[0]) else ""
    return (f"tokenwire serving on {server.url}/ ({loop_name()} loop); open in a browser:\n"
            f"  {server.url}/?format=html   the report\n"
            f"  {server.url}/live           a live stream you can watch\n"
            f"token log: {where}; Ctrl-C stops (open streams get {server.config.grace_s:g} s to finish){warning}")


def cli_main(argv: list[str]) -> int:
    """Run ``tokenwire serve``; returns the exit status (2 for bad usage, 1 if it cannot bind or its log's
    Redis refuses a command the log needs)."""
    parser = _parser()
    try:
        args = parser.parse(argv)
        check_port(args.port)
        routes = LIVE_ROUTES.with_limits({"max_body_bytes": args.max_body_bytes,
                                          "max_chat_body_bytes": args.max_chat_body_bytes})
        config, registry = _setup(args)
    except ValueError as exc:                 # a ParamError from the flags, or a bad setting
        return usage_error("serve", parser.refusal(str(exc), argv))
    configure_logging(args.quiet)
    raise_fd_limit()
    try:
        server = make_server(args.host, args.port, registry=registry, config=config, routes=routes,
                             metrics=not args.no_metrics)
    except OSError as exc:
        return cannot_listen("serve", args.host, args.port, exc)
    with server:
        if not log_checked("serve", registry.log):
            return 1
        print(_banner(server), flush=True)
        server.serve_forever(signals=True)
    return 0
