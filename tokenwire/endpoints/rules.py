"""The live routes' rules, each written once: headers, refusals and their messages, the cursor.

How this works: pure functions of a request's parts, which ``decide`` runs
in order after the route table (``routes``) has found the route (its 404,
405 and 501 are made here), the ``Last-Event-ID`` header (``last_event_id``), what an events
request asks for (``events_request``: the cursor, a cut, or a 204 when the
reader has every token of a stream that ended normally), the 201 of a created stream (``created``), and the
refusals of the request's body, the registry and the token log as
``RequestError`` (``check_transfer_encoding``, ``chunked_error``, ``body_error``, ``busy_error``,
``quota_error``, ``log_error``).  Both servers answer a ``RequestError`` as
JSON ``{"error": ...}`` with ``JSON_HEADERS`` and the error's own headers;
``tokenwire serve``'s HTTP layer refuses an oversized body with the same
error before the request reaches a route.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Collection
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode

from ..core.stream import Stream
from ..core.tokenlog import LogError, LogGap, LogUnavailable, StreamLost, StreamState, UnknownStream
from .config import RETRY_AFTER_S
from .params import (
    MAX_QUERY_FIELDS,
    RequestError,
    cut_range_message,
    echo,
    header_text,
    parse_count,
    resume_cursor,
    split_query,
    unknown_stream_message,
)
from .registry import Busy, OverQuota, Registry

__all__ = ["JSON_HEADERS", "KNOWN_METHODS", "LOG_UNAVAILABLE", "NO_CONTENT_HEADERS",
           "NO_STORE", "SECURITY_HEADERS", "SSE_HEADERS", "EventsRequest", "behind_the_log", "body_error",
           "busy_error", "check_room",
           "check_declared_body", "check_query", "check_transfer_encoding", "chunked_error", "created",
           "declared_length", "error_body", "events_request", "last_event_id", "log_error", "lost_if_behind",
           "method_error",
           "no_route_error", "not_implemented_error", "quota_error", "stopped"]

# Methods some route answers (with 405 where a path does not take one); any
# other method is 501, as RFC 9110 asks of a method a server does not implement.
KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"})
# A declared body length is quoted in a 413 up to this many digits (2**64 has 20); a longer one is counted.
MAX_SIZE_DIGITS = 20

SECURITY_HEADERS = (("X-Content-Type-Options", "nosniff"), ("Referrer-Policy", "no-referrer"))
NO_STORE = (("Cache-Control", "no-store"),)
SSE_HEADERS = (("Content-Type", "text/event-stream; charset=utf-8"), ("Cache-Control", "no-store"),
               ("X-Accel-Buffering", "no"), *SECURITY_HEADERS)
JSON_HEADERS = (("Content-Type", "application/json"), *SECURITY_HEADERS, *NO_STORE)
# A 204 (the reader has every token of a finished stream): no body.
NO_CONTENT_HEADERS = (("Content-Type", "text/plain; charset=utf-8"), *SECURITY_HEADERS, *NO_STORE)
_RETRY = (("Retry-After", str(RETRY_AFTER_S)),)
# A body whose framing is refused cannot be told from the next request on the connection: it is closed after the
# answer (serve closes every connection; under uvicorn this header makes the server close it).
_CLOSE = (("Connection", "close"),)
# All a client is told of a token-log failure: never a host, a port, a user or a password.
LOG_UNAVAILABLE = "the token log is unavailable"
# An outage refuses every request: the operator's line naming the failure (and the host, never the password:
# the log's messages show its URL redacted) is said at most once this often, not once a request.
UNAVAILABLE_LOG_EVERY_S = 10.0
_logger = logging.getLogger("tokenwire")
_unavailable_said_at = [float("-inf")]


# The ``type`` of an error in OpenAI's format, by status (the API's own names); any other status is a server error.
# (401 and 403 as OpenAI answers a key it does not accept, or one that may not do what it asks.)
_OPENAI_TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 403: "invalid_request_error",
                 404: "not_found_error", 405: "invalid_request_error",
                 410: "invalid_request_error", 411: "invalid_request_error", 413: "invalid_request_error",
                 429: "rate_limit_error"}


def error_body(message: str, status: int = 400, errors: str = "tokenwire") -> bytes:
    """The body of a live endpoint's error: tokenwire's JSON ``{"error": message}``, or OpenAI's.

    ``errors``: the route's format; ``"openai"`` is ``{"error": {"message",
    "type", "code"}}``, its type named by ``status``.
    """
    if errors == "openai":
        kind = _OPENAI_TYPES.get(status, "server_error")
        return json.dumps({"error": {"message": message, "type": kind, "code": None}}).encode()
    return json.dumps({"error": message}).encode()


def not_implemented_error(method: str) -> RequestError:
    """The 501 for a method no route here takes."""
    return RequestError(501, f"method {method[:20]!r} is not implemented here")


def no_route_error(path: str, routes: str) -> RequestError:
    """The 404 of a path that is none of the live ``routes`` (where they are all a server serves)."""
    return RequestError(404, f"no such path {echo(path)}: the routes here are {routes}")


def chunked_error(query: bool = True) -> RequestError:
    """The 411 for a chunked body: ``query``, a route whose parameters are its query's (``POST /streams``)."""
    if query:
        return RequestError(411, "send the parameters in the query string; chunked bodies are refused")
    return RequestError(411, "send the body with its Content-Length; chunked bodies are refused")


def check_transfer_encoding(transfer_encoding: list[str], content_length: list[str],
                            chunked: RequestError | None = None) -> None:
    """Refuse a body's ``Transfer-Encoding`` (RFC 9112 §6.1, §6.3), the one rule of both servers and every route.

    ``transfer_encoding``, ``content_length``: the request's values of those
    headers; ``chunked``: the route's refusal of a chunked body (None where
    one is read).  Raises ``RequestError``: 400 for a ``Transfer-Encoding``
    with a ``Content-Length`` (a length said two ways, as a smuggled request
    says it), 501 for any coding but ``chunked`` alone, each closing the
    connection; then ``chunked``.
    """
    if not transfer_encoding:
        return
    coding = ", ".join(transfer_encoding)
    if content_length:
        raise RequestError(400, f"Transfer-Encoding {echo(coding)} and Content-Length "
                                f"{echo(', '.join(content_length))} both given; send one of them", _CLOSE)
    if coding.strip(" \t").lower() != "chunked":
        send = "a body chunked or" if chunked is None else "the body"
        raise RequestError(501, f"Transfer-Encoding {echo(coding)} is not supported; send {send} with its "
                                f"Content-Length", _CLOSE)
    if chunked is not None:
        raise chunked


def declared_length(content_length: list[str]) -> str | None:
    """The body length the ``Content-Length`` values declare, its digits without leading zeros; None without one.

    Raises ``RequestError`` 400 for a value that is not a decimal number of
    bytes (``5, 5`` too), or for two values spelled differently.
    """
    spelled = []
    for value in content_length:
        digits = value.strip(" \t")
        if not (digits.isascii() and digits.isdigit()):
            raise RequestError(400, f"Content-Length {echo(value)} is not a number of bytes")
        spelled.append(digits)
    if len(set(spelled)) > 1:
        raise RequestError(400, f"Content-Length given {len(spelled)} times, as "
                                f"{', '.join(map(echo, spelled[:-1]))} and {echo(spelled[-1])}; send it once")
    return (spelled[0].lstrip("0") or "0") if spelled else None


def check_declared_body(content_length: list[str], limit: int) -> None:
    """Refuse a body whose ``Content-Length`` says it is past ``limit``, before anything is read.

    Raises ``RequestError``: 413 for a length past ``limit``, however many
    digits it has; 400 for a malformed one (``declared_length``).
    """
    size = declared_length(content_length)
    if size is not None and (len(size) > len(str(limit)) or int(size) > limit):   # no int() of 10,000 digits
        raise body_error(limit, size)


def body_error(limit: int, size: str | None = None) -> RequestError:
    """The 413 for a body past ``limit`` bytes (``size``: the decimal length ``Content-Length`` announced)."""
    if size is None:
        return RequestError(413, f"request body longer than {limit} bytes")
    if len(size) > MAX_SIZE_DIGITS:
        return RequestError(413, f"request body of a {len(size)}-digit number of bytes; at most {limit} are read")
    return RequestError(413, f"request body of {size} bytes; at most {limit} are read")


def check_query(query: str, takes: Collection[str] | None, repeatable: Collection[str], route: str) -> None:
    """Refuse (400) what a route's query may not hold, the one rule of both servers and every route.

    ``takes``: the only parameters the route takes (empty: no query string
    at all; None: the route's handler reads its query and says what it
    takes); ``repeatable``: those that may come more than once (``name[]``
    on ``/metrics``); ``route``: the route as a refusal names it.  Any other
    parameter given twice is refused, naming it: no value is silently the
    last one.
    """
    if takes is not None and not takes and query:
        raise RequestError(400, f"{route} takes no query string, got {echo(query)}")
    try:
        pairs = parse_qsl(query, keep_blank_values=True, max_num_fields=MAX_QUERY_FIELDS)
    except ValueError:
        raise RequestError(400, f"query string has more than {MAX_QUERY_FIELDS} parameters") from None
    given: dict[str, str] = {}
    for name, value in pairs:
        if takes is not None and name not in takes:
            raise RequestError(400, f"unknown parameter {echo(name)} (given {echo(value)}); allowed: "
                                    f"{', '.join(takes)}")
        if name in given and name not in repeatable:
            raise RequestError(400, f"parameter {echo(name)} given more than once ({echo(given[name])} and "
                                    f"{echo(value)}); give it once")
        given[name] = value


def method_error(path: str, method: str, allow: str) -> RequestError:
    """The 405 for a served ``path`` asked with a ``method`` it does not take."""
    return RequestError(405, f"{echo(path)} does not take {method}; it takes {allow}", (("Allow", allow),))


def last_event_id(values: list[str], created: bool) -> str | None:
    """Return the ``Last-Event-ID`` header (its Latin-1 ``values``) as the sender wrote it, None if absent.

    Raises ``RequestError`` 400 when it is sent twice, or with a value on a
    request that creates a stream (``created``).
    """
    if len(values) > 1:
        raise RequestError(400, f"Last-Event-ID given {len(values)} times; send it once")
    if not values:
        return None
    if created and values[0].strip(" \t"):
        raise RequestError(400, "Last-Event-ID resumes a stream at /streams/<id>/events; GET /stream starts "
                                "a new one (its open event names the id)")
    return header_text(values[0])


@dataclass(frozen=True, slots=True)
class EventsRequest:
    """What an events request asks for.

    cursor: the exclusive resume cursor (-1: from the start); cut: the
    ``cut_after`` it asks for (None: none); header / query_id: the
    ``Last-Event-ID`` header and ``?last_event_id=`` as sent; complete: the
    cursor is the last index of a stream that ended normally (answer 204).
    """

    cursor: int
    cut: int | None
    header: str | None
    query_id: str | None
    complete: bool


async def behind_the_log(registry: Registry, stream: Stream, query: str, header_values: list[str], generated: int,
                         state: StreamState) -> int:
    """The tokens the log holds for ``stream`` (``generated``), once a cursor past them is dealt with.

    On a shared log, a cursor past the log's end on a stream still generating means the log went back past
    what a reader was sent (a failover promoted a replica that had not had them): the stream is marked lost
    (``AsyncRedisLog.lose_past``) and the request is refused 410, rather than generated again from the log's
    end and spliced onto what the reader has.  On the memory log such a cursor was never sent (400, below).
    """
    if registry.aio is None or state is not StreamState.GENERATING:
        return generated
    _, params = split_query(query)
    cursor = resume_cursor(last_event_id(header_values, False), params.get("last_event_id"), stream.total,
                           stream.total)
    if cursor < generated:
        return generated
    await lost_if_behind(registry, stream.stream_id, cursor)
    return (await registry.progress_async(stream.stream_id))[0]       # it reached the cursor meanwhile


async def lost_if_behind(registry: Registry, stream_id: str, index: int) -> None:
    """Raise the lost stream's 410 if a shared log still lacks token ``index`` of a stream still generating, when
    a reader holds what came of it: the log went back (``behind_the_log``), and the stream is marked lost.
    Returns if the log reached ``index`` meanwhile (the caller looks again), or on the memory log."""
    if registry.aio is not None and await registry.aio.lose_past(stream_id, index):
        raise log_error(StreamLost(stream_id))


def events_request(query: str, header_values: list[str], stream: Stream, generated: int, state: StreamState, *,
                   created: bool) -> EventsRequest:
    """Read an events request for ``stream`` (``generated`` tokens logged, ``state`` as the log says); raises
    ``RequestError`` (400).

    ``created``: the request made the stream (``GET /stream``), so only its
    own ``cut_after`` counted and no cursor may be given.  The caller then
    checks the log still holds the cursor's next token (a 410 gap).
    """
    rest, params = split_query(query)
    if not created and rest:
        raise RequestError(400, f"an events URL takes only last_event_id and cut_after, got {urlencode(rest)!r}")
    header = last_event_id(header_values, created)
    cursor = resume_cursor(header, params.get("last_event_id"), stream.total, generated)
    requested = parse_count("cut_after", params["cut_after"]) if "cut_after" in params and not created else None
    if requested is not None and not 0 <= requested < stream.total:
        raise RequestError(400, cut_range_message(stream.total, params["cut_after"]))
    # 204 only to a reader that has every token of a stream that ended
    # normally (the log says done, on every process).  A stream cancelled,
    # stopped or failed (its state is cancelled) replays its ending instead,
    # so that a reader never takes a truncated answer for a whole one.
    complete = state is StreamState.DONE and 0 <= cursor == generated - 1
    return EventsRequest(cursor, requested, header, params.get("last_event_id"), complete)


def created(stream_id: str, root_path: str = "") -> tuple[tuple[tuple[str, str], ...], bytes]:
    """The headers and body of a 201 for a new stream; its events URL starts with ``root_path`` (a mount)."""
    url = f"{root_path}/streams/{stream_id}/events"
    body = json.dumps({"stream_id": stream_id, "events_url": url}).encode()
    return (("Content-Type", "application/json"), *SECURITY_HEADERS, ("Location", url), *NO_STORE), body


def stopped(stream_id: str, state: StreamState) -> tuple[tuple[tuple[str, str], ...], bytes]:
    """The headers and body of a stop's 200: the stream and its state now (``stopped``, or ``done``)."""
    return JSON_HEADERS, json.dumps({"stream_id": stream_id, "state": state.value}).encode()


def busy_error(exc: Busy) -> RequestError:
    """The 503 for a server that holds its ``max_live`` open streams."""
    return RequestError(503, str(exc), _RETRY)


def check_room(registry: Registry) -> None:
    """Raise the 503 when ``registry`` holds its ``max_live`` open streams (before a stream is made for one)."""
    if registry.live >= registry.max_live:
        raise busy_error(Busy(registry.max_live))


def take_slot(registry: Registry) -> None:
    """Take one of ``registry``'s open-stream slots for a connection; raises the 503 when none is free."""
    try:
        registry.open_slot()
    except Busy as exc:
        raise busy_error(exc) from None


def quota_error(exc: OverQuota) -> RequestError:
    """The 429 for a client past its stream-creation allowance."""
    return RequestError(429, str(exc), (("Retry-After", str(exc.retry_after_s)),))


def log_error(exc: LogError) -> RequestError:
    """The answer to a token-log failure: 404 for a stream it does not hold, 410 for a gap or a stream whose
    tokens it lost, else 503.

    A 503 says only ``LOG_UNAVAILABLE``; why (and where) goes to the operator's log, at most every 10 s.
    """
    if isinstance(exc, UnknownStream):
        return RequestError(404, unknown_stream_message(exc.stream_id))
    if isinstance(exc, LogGap | StreamLost):
        return RequestError(410, str(exc))
    now = time.monotonic()
    if now - _unavailable_said_at[0] >= UNAVAILABLE_LOG_EVERY_S:
        _unavailable_said_at[0] = now
        why = str(exc) if isinstance(exc, LogUnavailable) else f"token log error: {exc}"
        _logger.warning("answering 503 (%s): %s", LOG_UNAVAILABLE, why)
    return RequestError(503, LOG_UNAVAILABLE, _RETRY)
