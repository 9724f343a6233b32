"""``tokenwire read URL``: print a tokenwire stream's text as it comes, resuming by itself.

How this works: the flags become ``events`` arguments; each ``token``
event's data (or a chat stream's ``text-delta``: the AI SDK's UI message
stream at ``GET /chat/<id>/stream``) is written to stdout and flushed.
``done`` (or a 204: the
reader has everything) exits 0; anything else is one line on stderr,
``tokenwire read: ...``: exit 1 for a failed stream, one that ended early (a
``done`` with ``stopped_early``: stopped, cancelled, lost), a refusal or
attempts run out, 2 for bad flags.  Nothing reaches the user as a traceback.
While it retries after attempts that brought nothing (a refused connection,
a 503), each retry is a line on stderr saying what failed, how long it waits
and which attempt of how many comes next: a wait is never silent.
No line shows a URL's userinfo: a retry names the host and port it tries,
the others the path, and a usage error any URL it quotes redacted.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import TextIO
from urllib.parse import urlsplit

from ..cli import FlagParser, usage_error
from ..core.sse import Event
from ..redislog.redact import scrub
from .reconnect import DEFAULT_MAX_ATTEMPTS, ClientError, Request, error_text
from .streams import events

__all__ = ["cli_main", "read"]

# A header's name is an HTTP token (RFC 9110's tchar).
_TCHAR = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
# More attempts than this in a row is waiting on a server that is not coming back.
MAX_ATTEMPTS = 100


def _parser() -> FlagParser:
    parser = FlagParser("tokenwire read", "print a tokenwire stream's text as it comes, resuming by itself")
    parser.add_argument("url", metavar="URL", help="the stream: .../stream?<parameters>, .../streams/<id>/events "
                        "or a chat's .../chat/<id>/stream?startIndex=0")
    parser.add_argument("--header", action="append", default=[], metavar="'Name: value'",
                        help="a request header, sent on every connection (repeatable)")
    parser.add_argument("--last-event-id", metavar="N", help="resume after this id (as an EventSource would)")
    parser.add_argument("--max-attempts", type=int, default=DEFAULT_MAX_ATTEMPTS, metavar="N",
                        help=f"connections in a row without a new token before giving up [{DEFAULT_MAX_ATTEMPTS}]")
    return parser


def _shown(value: str) -> str:
    """A bad ``--header`` as its error quotes it: up to its ':' (or first space), never a value: it may be a key."""
    name, colon, rest = value.partition(":")
    if not colon:
        name, _, rest = value.partition(" ")
    return repr(name + colon) + (" and a value, not shown here" if rest else "")


def _headers(values: list[str]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for value in values:
        name, colon, text = value.partition(":")
        if not colon or not name or not set(name) <= _TCHAR or any(c in text for c in "\r\n\0"):
            raise ValueError(f"--header must look like 'Name: value'; got {_shown(value)}")
        headers[name] = text.strip()
    return headers


def cli_main(argv: list[str], *, sleep: Callable[[float], object] = time.sleep) -> int:
    """Run ``tokenwire read``; returns the exit status (``sleep`` is for tests)."""
    parser = _parser()
    try:
        args = parser.parse(argv)
        headers = _headers(args.header)
        if not 1 <= args.max_attempts <= MAX_ATTEMPTS:
            raise ValueError(f"--max-attempts must be from 1 to {MAX_ATTEMPTS}; got {args.max_attempts!r}")
        if args.last_event_id is not None and any(c in args.last_event_id for c in "\r\n\0"):
            raise ValueError(f"--last-event-id must be one line; got {args.last_event_id!r}")
        stream = events(args.url, headers=headers, last_event_id=args.last_event_id,
                        max_attempts=args.max_attempts, sleep=sleep, on_retry=_retrying(args.max_attempts))
    except ValueError as exc:                       # a ParamError from the flags, or a bad value
        return usage_error("read", _scrubbed(parser.refusal(_url_message(str(exc)), argv), argv))
    try:
        return read(stream, sys.stdout)
    except ClientError as exc:
        return _fail(str(exc))
    except BrokenPipeError:               # whoever read stdout is gone (``| head``): stop quietly, as cat does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit's flush cannot fail again
        return 1


def read(stream: Iterator[Event], out: TextIO) -> int:
    """Write each token's text to ``out`` as it comes; returns 0 at ``done`` (or a 204), 1 at ``failed`` or at a
    ``done`` that ended early."""
    tokens = 0
    for event in stream:
        chunk = _ui_chunk(event) if event.event == "message" else {}
        kind = chunk.get("type")
        if event.event == "token" or kind == "text-delta":
            out.write(event.data if event.event == "token" else str(chunk.get("delta", "")))
            out.flush()
            tokens += 1
        elif event.event in ("failed", "error"):
            return _fail(f"the stream failed: {error_text(event.data)}")
        elif kind == "error":
            return _fail(f"the stream failed: {chunk.get('errorText')}")
        elif event.event == "done" and (early := _early(event.data)) is not None:
            return _fail(early)
        elif kind == "finish" and chunk.get("finishReason") == "other":
            return _fail(f"the stream ended early (stopped or cancelled) after {tokens} tokens; what was printed "
                         "is not the whole answer")
    if out.isatty():
        out.write("\n")
    return 0


def _ui_chunk(event: Event) -> dict[str, object]:
    """A chunk of the AI SDK's UI message stream (``GET /chat/<id>/stream``): its JSON object, else empty."""
    try:
        chunk = json.loads(event.data)
    except ValueError:
        return {}
    return chunk if isinstance(chunk, dict) else {}


def _early(data: str) -> str | None:
    """What a ``done`` of a stream that ended early (stopped, cancelled, lost) says, None for a whole answer.

    Said on stderr with exit 1, so that a script never takes the truncated text it printed for the answer.
    """
    try:
        ending = json.loads(data)
    except ValueError:
        return None
    if not isinstance(ending, dict) or ending.get("stopped_early") is not True:
        return None
    reason = ending.get("reason")
    return (f"the stream ended early ({reason if isinstance(reason, str) and reason else 'stopped'}) after "
            f"{ending.get('tokens', '?')} tokens; what was printed is not the whole answer")


def _retrying(max_attempts: int) -> Callable[[Request], None]:
    """What says, on stderr, each retry after an attempt that brought nothing: the wait is not a hang."""
    def say(request: Request) -> None:
        print(f"tokenwire read: {request.after}; trying {_host(request.url)} again in "
              f"{request.wait_s:.1f} s (attempt {request.attempt} of {max_attempts})", file=sys.stderr, flush=True)
    return say


def _host(url: str) -> str:
    """Where ``url`` connects, as a retry names it: host and port (an IPv6 host in brackets), never the userinfo."""
    return urlsplit(url).netloc.rpartition("@")[2]


def _scrubbed(message: str, argv: list[str]) -> str:
    """``message`` without the password of any URL in ``argv`` (a stray argument is quoted as typed)."""
    for arg in argv:
        if "://" in arg:
            message = scrub(message, arg)
    return message


def _url_message(message: str) -> str:
    """``Reconnect``'s word for a bad URL, as the command names it."""
    if message.startswith("url must be"):
        return "URL" + message[len("url"):].replace(", got", "; got")
    return message


def _fail(message: str) -> int:
    print(f"tokenwire read: {message}", file=sys.stderr, flush=True)
    return 1
