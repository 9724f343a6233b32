"""``tokenwire proxy --upstream URL``: ``TokenStreams(Upstream(...))`` under uvicorn, with ``tokenwire serve``'s flags.

How this works: the flags ``serve`` shares with every command that serves
the live routes (``add_stream_flags``: where, the limits, ``--log``) make the
``TokenStreams``; the proxy's own name the upstream (``--upstream``,
``--model``, ``--api-key-env``, its timeouts and an answer's bounds in tokens and
in time) and what a follower does when
the instance relaying a stream dies (``--takeover continue``, which needs
``--continue-final-message``: an upstream that continues a partial answer).
The socket is bound before uvicorn starts, so ``--port 0`` is printed as the
port it got.  uvicorn's HTTP protocol is held to serve's request limits
(``guard``: the head's size, ``--request-timeout-s`` for a request to arrive
whole).  The upstream's URL is printed (and named) with its password
as ``***``.  A bad flag is one line naming it, exit 2, as for every command.
"""

from __future__ import annotations

import argparse
import asyncio
import socket

from ..asgi import TokenStreams
from ..cli import FlagParser, usage_error
from ..endpoints.config import LiveConfig
from ..live.command import (
    add_stream_flags,
    beyond_loopback,
    cannot_listen,
    check_port,
    configure_logging,
    log_checked,
    open_warning,
    raise_fd_limit,
)
from ..live.sockets import listening
from ..redislog.redact import redact_url
from .guard import guarded
from .relay import (
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_MAX_ANSWER_S,
    DEFAULT_MAX_ANSWER_TOKENS,
    DEFAULT_READ_TIMEOUT_S,
    Upstream,
    UpstreamConfig,
)

__all__ = ["cli_main"]

# The listening socket's queue of connections not yet accepted: uvicorn's own default.
BACKLOG = 2048


def _parser() -> FlagParser:
    parser = FlagParser("tokenwire proxy", (
        "Serve an OpenAI-compatible model server (vLLM, SGLang, Ollama, llama.cpp, LM Studio) through every "
        "route tokenwire speaks: its own frames, the AI SDK's /chat, OpenAI's /v1/chat/completions and "
        "/v1/responses, each logged and resumable."))
    add = parser.add_argument
    add("--upstream", required=True, metavar="URL",
        help="the upstream's OpenAI base URL, e.g. http://127.0.0.1:8000/v1 (vLLM) or http://127.0.0.1:11434/v1 "
             "(Ollama)")
    add("--model", default=None, help="the model to ask the upstream for (default: the one each request names)")
    add("--api-key-env", default=None, metavar="NAME",
        help="the environment variable holding the upstream's API key (default: none sent)")
    add("--takeover", default="end", choices=("end", "continue"),
        help="when the instance relaying a stream dies: end it ('owner lost'), or continue it from the logged "
             "prefix on another instance (needs --continue-final-message and a Redis --log; default end)")
    add("--continue-final-message", action="store_true",
        help="the upstream continues an assistant's partial turn (continue_final_message; vLLM and SGLang do)")
    add("--connect-timeout-s", type=float, default=DEFAULT_CONNECT_TIMEOUT_S,
        help=f"fail a stream whose upstream cannot be reached in this long (default {DEFAULT_CONNECT_TIMEOUT_S:g})")
    add("--upstream-timeout-s", type=float, default=DEFAULT_READ_TIMEOUT_S, dest="read_timeout_s",
        help=f"fail a stream whose upstream sends no data for this long, comments such as ': ping' not counted "
             f"(default {DEFAULT_READ_TIMEOUT_S:g})")
    add("--max-answer-tokens", type=int, default=DEFAULT_MAX_ANSWER_TOKENS,
        help=f"fail an answer that goes on past this many tokens (UpstreamTooLong; default "
             f"{DEFAULT_MAX_ANSWER_TOKENS})")
    add("--max-answer-s", type=float, default=DEFAULT_MAX_ANSWER_S,
        help=f"fail an answer that goes on past this many seconds in all (UpstreamOvertime; default "
             f"{DEFAULT_MAX_ANSWER_S:g})")
    add_stream_flags(parser)
    return parser


def _app(args: argparse.Namespace) -> TokenStreams:
    """The ``TokenStreams`` the flags describe; raises ``ValueError`` naming a bad one."""
    check_port(args.port)
    LiveConfig(request_timeout_s=args.request_timeout_s)     # refused by name as serve refuses it
    if args.takeover == "continue" and not args.continue_final_message:
        raise ValueError("--takeover continue needs an upstream that continues a partial answer: add "
                         "--continue-final-message (vLLM, SGLang), or keep --takeover end")
    config = UpstreamConfig(args.upstream, model=args.model, api_key_env=args.api_key_env,
                            continue_final_message=args.continue_final_message,
                            connect_timeout_s=args.connect_timeout_s, read_timeout_s=args.read_timeout_s,
                            max_answer_tokens=args.max_answer_tokens, max_answer_s=args.max_answer_s)
    return TokenStreams(Upstream(config), log=args.log, heartbeat_s=args.heartbeat_s,
                        write_timeout_s=args.write_timeout_s, max_live=args.max_live, max_streams=args.max_streams,
                        create_burst=args.create_burst, create_rate=args.create_rate,
                        max_body_bytes=args.max_body_bytes, max_chat_body_bytes=args.max_chat_body_bytes,
                        grace_s=args.grace_s, max_duration_s=args.max_duration_s, takeover=args.takeover,
                        name=" ".join(("upstream", config.where, *([args.model] if args.model else []))))


def cli_main(argv: list[str]) -> int:
    """Run ``tokenwire proxy``; returns the exit status (2 for bad usage, 1 if it cannot bind or its log's
    Redis refuses a command the log needs)."""
    parser = _parser()
    try:
        args = parser.parse(argv)
        app = _app(args)
    except ValueError as exc:
        return usage_error("proxy", parser.refusal(str(exc), argv))
    import uvicorn

    configure_logging(args.quiet, "proxy")
    raise_fd_limit()
    if not log_checked("proxy", app.registry.log):
        return 1
    try:
        sock = listening(args.host, args.port, BACKLOG)   # before the banner: its reader may connect at once
    except OSError as exc:
        return cannot_listen("proxy", args.host, args.port, exc)
    host, port = sock.getsockname()[:2]
    where = f"[{host}]" if sock.family == socket.AF_INET6 else host
    warning = f"\n{open_warning('proxy', ', and anyone may ask your upstream, with its key')}" \
        if beyond_loopback(host) else ""
    print(f"tokenwire proxy serving on http://{where}:{port}/ relaying {redact_url(args.upstream)}{warning}",
          flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="error" if args.quiet else "warning",
                                           access_log=not args.quiet, limit_concurrency=args.max_connections,
                                           timeout_graceful_shutdown=max(1, round(args.grace_s) + 1),
                                           http=guarded(app.endpoints.routes, args.request_timeout_s)))
    asyncio.run(server.serve(sockets=[sock]))
    return 0
