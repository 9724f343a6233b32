"""An SSE client's reconnect state, without I/O: what to ask for next, when, and when to give up.

How this works: ``Reconnect`` is told, in order, what happened to each
connection, and decides.  ``request()`` gives the next request (its URL,
its headers with ``Last-Event-ID``, how long to wait before sending it), or
None once the stream has ended.  Then one of: ``answered(...)`` for any
status but 200 (204 ends the stream; 5xx, 408 and 429 are retried, after
``Retry-After`` if the server sent one; any other status raises
``StreamRefused``); or ``opened(content_type)`` for a 200, ``feed(chunk)``
for each chunk of its body (the events to hand out; the end event ends the
stream) and ``dropped(reason)`` when the body stops short of the end event
(a clean EOF, a read error) or the connection cannot be made.  Both take
the answer's ``Content-Encoding``: the body is fed as sent, never
decompressed (a decoder's bound applies to what comes, not to what 32 KB
of zstd inflate to), so a compressed 200 raises ``ProtocolError`` naming
its encoding, and a compressed refusal's body is not quoted.

Each connection gets a new ``Decoder`` that starts from the old one's last
event ID and ``retry``, as the spec's EventSource keeps both across
connections; a block cut in half by a dropped connection is discarded with
its decoder.  Attempts count connections in a row that brought no event
with a new id: a connection that moved the stream on resets the count, so a
long stream through a proxy that cuts every connection still completes,
while a server that answers nothing useful is given up on after
``max_attempts``.  The wait before a reconnect is the stream's ``retry``
(or ``Backoff.initial_s`` until the stream sets one), times
``Backoff.multiplier`` per failed attempt in a row, plus jitter, at most
``Backoff.max_s``.

tokenwire's own rules, which no other server's stream trips over: the end
events are ``done`` and ``failed`` (``error``, its name before, too), as is
an event with no name whose data is ``[DONE]`` (how OpenAI's and the AI SDK's streams
end, tokenwire's ``/chat`` and ``/v1`` routes included), and a
stream started with ``GET .../stream`` names itself in its ``open`` event,
so reconnects go to ``.../streams/<id>/events`` (``GET /stream`` starts a
new stream; it never resumes one).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from random import random as _random
from urllib.parse import quote, urlsplit, urlunsplit

from ..core.sse import Decoder, Event, SSEError, compressed, not_compressed, not_read
from ..redislog.redact import redact_url

__all__ = [
    "DEFAULT_MAX_ATTEMPTS",
    "DONE_DATA",
    "END_EVENTS",
    "AttemptsExhausted",
    "Backoff",
    "ClientError",
    "ProtocolError",
    "Reconnect",
    "Request",
    "StreamRefused",
]

# A tokenwire stream's last event: ``done``, or ``failed`` for a model's
# failure (named ``error`` before: a browser's EventSource fires its own
# ``error`` on every dropped connection).
END_EVENTS = frozenset({"done", "failed", "error",
                        # OpenAI's Responses stream (GET /v1/responses/<id>?stream=true too): its events carry
                        # no SSE id, so a reconnect after its last event replayed the whole response again.
                        "response.completed", "response.failed", "response.incomplete"})
# The last event of an OpenAI or AI SDK stream (tokenwire's /chat and /v1 routes too): the data of an event
# with no name (a token event whose text is "[DONE]" is a token).  Without it as an end, a chat stream read at
# ``?startIndex=0`` was replayed from 0 on every reconnect.
DONE_DATA = "[DONE]"
# Five connections in a row with nothing new: with the default backoff
# 2 + 4 + 8 + 16 s of waiting (up to half as much again with jitter), long
# enough to ride out a restart.
DEFAULT_MAX_ATTEMPTS = 5
# Statuses worth asking again: the server's trouble, or its "not now".
RETRIED = frozenset({408, 429})
# A refusal's text is one line of a message, not a page.
MAX_ERROR_TEXT = 300


class ClientError(Exception):
    """Base class of what ``tokenwire.client`` raises about a stream."""


class StreamRefused(ClientError):
    """The server answered with a status that asking again would not change (a 4xx)."""

    def __init__(self, path: str, status: int, message: str) -> None:
        super().__init__(message)
        self.path, self.status = path, status


class AttemptsExhausted(ClientError):
    """``max_attempts`` connections in a row brought no new event; ``reason`` says what the last one did."""

    def __init__(self, path: str, attempts: int, reason: str) -> None:
        super().__init__(f"gave up on {path} after {attempts} attempts in a row without a new event; "
                         f"the last: {reason}")
        self.path, self.attempts, self.reason = path, attempts, reason


class ProtocolError(ClientError):
    """The answer is not an event stream, or breaks its rules (a line past the decoder's bound)."""


@dataclass(frozen=True, slots=True)
class Backoff:
    """The wait before a reconnect: ``initial_s`` until the stream sets ``retry`` (which replaces it), times
    ``multiplier`` per failed attempt in a row, plus up to ``jitter`` of itself at random, at most ``max_s``."""

    initial_s: float = 1.0
    multiplier: float = 2.0
    max_s: float = 30.0
    jitter: float = 0.5

    def __post_init__(self) -> None:
        for name in ("initial_s", "max_s", "jitter"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < math.inf:
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        if isinstance(self.multiplier, bool) or not isinstance(self.multiplier, int | float) \
                or not 1 <= self.multiplier < math.inf:
            raise ValueError(f"multiplier must be a finite number >= 1, got {self.multiplier!r}")

    def delay(self, base_s: float, failures: int, draw: float) -> float:
        """The wait after ``failures`` failed attempts in a row; ``draw`` is a random number in [0, 1)."""
        grown = base_s * self.multiplier ** min(failures, 64)
        return min(self.max_s, grown * (1 + self.jitter * draw))


@dataclass(frozen=True, slots=True)
class Request:
    """The next request: GET ``url`` with ``headers`` (the caller's replace ours of the same name) after
    waiting ``wait_s``; ``attempt`` counts from 1 the connections in a row since the last one that brought a
    new event, and from attempt 2 on ``after`` says what the one before did (a retry a user may be told of)."""

    url: str
    headers: tuple[tuple[str, str], ...]
    wait_s: float
    attempt: int
    after: str = ""


class Reconnect:
    """The reconnect state of one stream (see the module's docstring for the order of calls)."""

    def __init__(self, url: str, *, headers: Mapping[str, str] | None = None, last_event_id: str | None = None,
                 max_attempts: int = DEFAULT_MAX_ATTEMPTS, backoff: Backoff | None = None,
                 end_events: Collection[str] = END_EVENTS, random: Callable[[], float] = _random,
                 clock: Callable[[], float] = time.time) -> None:
        """Raises ValueError for a URL that is not http(s), ``max_attempts`` below 1 or a bad ``last_event_id``."""
        if not isinstance(url, str) or not _http_url(url):
            shown = redact_url(url) if isinstance(url, str) else url      # its password never in a message
            raise ValueError(f"url must be an http:// or https:// URL, got {shown!r}")
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            raise ValueError(f"max_attempts must be an int >= 1, got {max_attempts!r}")
        self.url = url
        self._headers = tuple((headers or {}).items())
        self._decoder = Decoder(last_event_id=last_event_id or "")
        self._max_attempts, self._backoff = max_attempts, backoff or Backoff()
        self._end_events, self._random, self._clock = frozenset(end_events), random, clock
        self._failures = 0           # connections in a row that brought no new event
        self._failure = ""           # what the last of them did
        self._wait_s = 0.0
        self._sent_id = self._decoder.last_event_id
        self._moved = False          # this connection brought an event with a new id
        self.ended = False

    @property
    def last_event_id(self) -> str:
        """The last event ID seen ("" if none): what the next request sends as ``Last-Event-ID``."""
        return self._decoder.last_event_id

    @property
    def retry_ms(self) -> int | None:
        """The stream's ``retry`` in ms, None until it sets one."""
        return self._decoder.retry

    def request(self) -> Request | None:
        """The next request to make, or None when the stream has ended."""
        if self.ended:
            return None
        mine = [("Accept", "text/event-stream"), ("Cache-Control", "no-cache")]
        if self.last_event_id:
            mine.append(("Last-Event-ID", self.last_event_id))
        given = {name.lower() for name, _ in self._headers}
        headers = (*((k, v) for k, v in mine if k.lower() not in given), *self._headers)
        self._sent_id, self._moved = self.last_event_id, False
        return Request(self.url, headers, self._wait_s, self._failures + 1, self._failure if self._failures else "")

    def opened(self, content_type: str, content_encoding: str = "") -> None:
        """A 200 came; raises ``ProtocolError`` if it is compressed (a ``Content-Encoding`` other than
        ``identity``: its body is never inflated) or not ``text/event-stream``."""
        if encoding := compressed(content_encoding):
            raise ProtocolError(f"{self._path()} answered 200 with {not_compressed(encoding, 'an SSE stream')}")
        if content_type.partition(";")[0].strip().lower() != "text/event-stream":
            raise ProtocolError(f"{self._path()} answered 200 with Content-Type {content_type!r}, "
                                "not text/event-stream")
        self._decoder = Decoder(last_event_id=self.last_event_id, retry=self.retry_ms)

    def feed(self, chunk: bytes) -> list[Event]:
        """The events ``chunk`` completes, up to and including the end event; raises ``ProtocolError``."""
        try:
            events = self._decoder.feed(chunk)
        except SSEError as exc:
            raise ProtocolError(f"{self._path()}: {exc}") from exc
        for n, event in enumerate(events):
            self._moved = self._moved or event.id != self._sent_id
            if event.event in self._end_events or (event.event == "message" and event.data == DONE_DATA):
                self.ended = True
                return events[: n + 1]
            if event.event == "open":
                self._follow(event.data)
        return events

    def dropped(self, reason: str) -> None:
        """The connection could not be made, or ended before the end event; raises ``AttemptsExhausted``."""
        self._fail(reason, 0.0)

    def answered(self, status: int, reason: str, retry_after: str | None, body: bytes,
                 content_encoding: str = "") -> None:
        """Any status but 200: 204 ends the stream, 5xx/408/429 are retried; raises ``StreamRefused``,
        ``AttemptsExhausted``.  A compressed ``body`` is not quoted: its encoding is named instead."""
        if status == 204:
            self.ended = True
            return
        encoding = compressed(content_encoding)
        text = not_read(encoding) if encoding else error_text(body)
        message = f"{self._path()} answered {status} {reason}".rstrip() + (f": {text}" if text else "")
        if status >= 500 or status in RETRIED:
            self._fail(message, self._retry_after_s(retry_after))
            return
        raise StreamRefused(self._path(), status, message)

    def _fail(self, reason: str, at_least_s: float) -> None:
        self._failures, self._failure = (0 if self._moved else self._failures + 1), reason
        if self._failures >= self._max_attempts:
            raise AttemptsExhausted(self._path(), self._failures, reason)
        base_s = self._backoff.initial_s if self.retry_ms is None else self.retry_ms / 1000
        wait_s = self._backoff.delay(base_s, self._failures, self._random())
        self._wait_s = max(wait_s, min(at_least_s, self._backoff.max_s))

    def _retry_after_s(self, value: str | None) -> float:
        """``Retry-After`` in seconds (a number of seconds or an HTTP date), 0 if absent or unreadable."""
        value = (value or "").strip()
        if value.isascii() and value.isdigit():
            return float(value)
        try:
            return max(0.0, parsedate_to_datetime(value).timestamp() - self._clock())
        except (TypeError, ValueError, IndexError):
            return 0.0

    def _follow(self, data: str) -> None:
        """tokenwire's ``GET .../stream`` names its stream in ``open``: resume at ``.../streams/<id>/events``."""
        parts = urlsplit(self.url)
        if not parts.path.endswith("/stream"):
            return
        try:
            stream_id = json.loads(data).get("stream_id")
        except (ValueError, AttributeError):
            return
        if isinstance(stream_id, str) and stream_id:
            path = f"{parts.path[: -len('stream')]}streams/{quote(stream_id, safe='')}/events"
            self.url = urlunsplit(parts._replace(path=path, query=""))

    def _path(self) -> str:
        return urlsplit(self.url).path or "/"


def _http_url(url: str) -> bool:
    """Whether ``url`` is http(s) with a host, and a port that is one (not ``99999``, nor an unclosed ``[``)."""
    try:
        parts = urlsplit(url)
        port = parts.port                   # raises ValueError for a port out of range or not a number
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.netloc) and port != 0


def error_text(body: bytes | str) -> str:
    """A refusal's (or a ``failed`` event's) message on one line: JSON ``{"error": text}`` or
    ``{"error": {"message": text}}``, else the body's text; cut at ``MAX_ERROR_TEXT`` characters."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    try:
        found = json.loads(text)
    except ValueError:
        found = None
    if isinstance(found, dict):
        error = found.get("error", found.get("message"))
        if isinstance(error, dict):
            error = error.get("message")
        if isinstance(error, str) and error:
            text = error
    text = " ".join(text.split())
    return text if len(text) <= MAX_ERROR_TEXT else text[: MAX_ERROR_TEXT - 1] + "…"
