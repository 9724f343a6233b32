"""HTTP/1.1 for the live server: one ``asyncio.Protocol`` per connection, each request parsed by h11.

How this works: bytes arrive in ``data_received`` and go to an
``h11.Connection`` (sans-IO and strict: a bare CR or a NUL in a header, a
missing ``Host`` are its ``RemoteProtocolError``, answered 400 at once).
Before h11 sees them, the head is held to this server's own limits and its
body's framing to its route's (``head_checks.precheck``), so each has its
own status and names the value.  A refusal is in the error format of the
route at the request's path, plain text elsewhere.

A request has ``request_timeout_s`` in total to arrive (request line,
headers, and the body of a route that reads one: the route table says which, and
its limit), however slowly it trickles in: one
loop timer from the connection's start, never restarted by a byte.  Then the
server's ``dispatch`` answers it with an ``Answer`` (written whole, and the
connection closed: one request per connection) or None: the routes have
sent the ``200`` and handed a ``TransportWire`` to the endpoints' writer,
which runs on the event-loop driver.  Transport flow control
(``pause_writing``/``resume_writing``) is handed to that wire, so a slow
reader holds only its own writer.  A client that goes away is not an
error: at most one access-log line, never a traceback.
"""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Protocol

import h11

from ..endpoints.config import MAX_HEADER_BYTES, MAX_REQUEST_LINE, LiveConfig
from ..endpoints.decide import refusal
from ..endpoints.decisions import Answer
from ..endpoints.params import RequestError, utf8
from ..endpoints.routes import Route, RouteTable
from ..endpoints.rules import KNOWN_METHODS, body_error
from .head_checks import MAX_HEADERS, precheck, protocol_error, refused, target_path, text_answer
from .sockets import TransportWire

__all__ = ["KNOWN_METHODS", "MAX_HEADERS", "Answer", "Host", "HttpConnection", "Request", "head_bytes",
           "text_answer"]

# The interim answer to ``Expect: 100-continue`` on a body route (as uvicorn sends it): without it such a
# client (curl past 1 MiB, older curls past 1 KiB, .NET's HttpClient) waits a second before sending the body.
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
# What h11 may buffer for one event: our limits on the head, and a little slack.
_H11_BUFFER = MAX_REQUEST_LINE + MAX_HEADER_BYTES + 1024
# How long a connection refused before its request was read whole goes on reading (and dropping) what the
# client still sends, after our answer and a FIN, before it is closed (the lingering close of Apache and
# nginx): long enough for a client to finish sending a 70 KB request line and read the answer.
LINGER_S = 2.0
# What a connection's parser becomes once its request is read: an h11 connection that never held a byte
# (nothing is parsed after the request: one request per connection).
_DONE = h11.Connection(h11.SERVER, max_incomplete_event_size=1)
# The answer to a refused request sent right after accepting it (--max-connections).
_REFUSED = "too many open connections: this server holds at most {cap}"


@dataclass(frozen=True, slots=True)
class Request:
    """One parsed request: the target decoded as UTF-8, header names lower-cased, the body (POST only)."""

    method: str
    target: str
    headers: tuple[tuple[str, str], ...]
    body: bytes
    client: str

    @property
    def path(self) -> str:
        return self.target.partition("?")[0]

    @property
    def query(self) -> str:
        return self.target.partition("?")[2].partition("#")[0]

    def header_values(self, name: str) -> list[str]:
        """Every value of header ``name`` (lower-case), as Latin-1 text."""
        return [value for key, value in self.headers if key == name]


class Host(Protocol):
    """What a connection needs of its server."""

    config: LiveConfig
    route_table: RouteTable

    def admit(self, connection: HttpConnection) -> bool: ...
    def requested(self, connection: HttpConnection) -> None: ...
    def forget(self, connection: HttpConnection) -> None: ...
    def dispatch(self, request: Request, connection: HttpConnection) -> Awaitable[Answer | None]: ...
    def access(self, line: str) -> None: ...


_date_cache: tuple[int, str] = (0, "")


def _date() -> str:
    global _date_cache
    now = int(time.time())
    if _date_cache[0] != now:
        _date_cache = (now, email.utils.formatdate(now, usegmt=True))
    return _date_cache[1]


def head_bytes(status: int, headers: tuple[tuple[str, str], ...] | list[tuple[str, str]]) -> bytes:
    """The status line and headers of a response (``Server``, ``Date`` and ``Connection: close`` added)."""
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = "Unknown"
    lines = [f"HTTP/1.1 {status} {reason}", "Server: tokenwire", f"Date: {_date()}",
             *(f"{name}: {value}" for name, value in headers if name.lower() != "connection"), "Connection: close",
             "", ""]
    return "\r\n".join(lines).encode("latin-1", "replace")



class HttpConnection(asyncio.Protocol):
    """One client connection: read a request under one deadline, answer it, close."""

    def __init__(self, host: Host, loop: asyncio.AbstractEventLoop) -> None:
        self.host, self.loop = host, loop
        self.transport: asyncio.Transport | None = None
        self.client = "-"
        self.wire: TransportWire | None = None        # set while an event stream is written
        self.busy = False                             # a request was read: answering it
        self.line_sent = False                        # its request line is complete: it is never shed
        self.closed = False
        self._h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=_H11_BUFFER)
        self._head = b""
        self._request: h11.Request | None = None
        self._body: list[bytes] = []                 # the body's pieces as h11 hands them: joined once
        self.body_size = 0                            # bytes of body read (the server's trimmer counts them)
        self._body_route: Route | None = None        # the route reading this request's body
        self._deadline: asyncio.TimerHandle | None = None
        self._task: asyncio.Future[Any] | None = None
        self._lingering = False                       # refused mid-request: reading what still comes, then closing

    # -- asyncio.Protocol ------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.client = str(peer[0]) if isinstance(peer, tuple) else "-"
        if not self.host.admit(self):
            self.answer(text_answer(503, _REFUSED.format(cap=self.host.config.max_connections),
                                    (("Retry-After", "1"),)), log=False)
            return
        self._deadline = self.loop.call_later(self.host.config.request_timeout_s, self._too_slow)

    def data_received(self, data: bytes) -> None:
        if self.busy or self.closed:
            return                          # nothing is read after the request (an SSE client says nothing)
        if self._request is None:
            self._head += data
            if not self.line_sent and b"\n" in data:   # the first LF ends the request line
                self.line_sent = True
                self.host.requested(self)
            early = precheck(self._head, self.host.route_table)
            if early is not None:
                self.answer(early, linger=True)
                return
        try:
            self._h11.receive_data(data)
            self._events()
        except h11.RemoteProtocolError as exc:
            words = self._head.partition(b"\n")[0].split(b" ")       # three once precheck has seen it whole
            error = RequestError(exc.error_status_hint, f"bad request: {protocol_error(exc)}")
            self.answer(refused(error, self.host.route_table, target_path(words[1]) if len(words) == 3 else None),
                        linger=True)

    def eof_received(self) -> bool | None:
        if self._lingering:
            self._close()                   # the client has read our answer and said all it will
            return None
        if self.busy:
            return True      # the client has said all it will: the answer (or the stream) still goes out
        self._close()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._cancel_deadline()
        wire, task, self.wire, self._task = self.wire, self._task, None, None   # no cycle outlives the socket
        if wire is not None:
            wire.lost(exc)
        if task is not None and not task.done():
            task.cancel()
        self.host.forget(self)

    def pause_writing(self) -> None:
        if self.wire is not None:
            self.wire.pause()

    def resume_writing(self) -> None:
        if self.wire is not None:
            self.wire.resume()

    # -- the request ---------------------------------------------------------------
    def _events(self) -> None:
        while not self.busy:
            event = self._h11.next_event()
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return
            if isinstance(event, h11.Request):
                self._request = event
                self._body_route = self.host.route_table.body_route(target_path(event.target),
                                                                    event.method.decode("latin-1"))
                if self._body_route is None:
                    self._dispatch()                # a route without a body ignores what is sent
                elif self._h11.they_are_waiting_for_100_continue and self.transport is not None:
                    self.transport.write(_CONTINUE)  # precheck refused a length past the limit before this
            elif isinstance(event, h11.Data):
                self._body.append(event.data)
                self.body_size += len(event.data)
                route = self._body_route
                if route is not None and self.body_size > route.body_limit:
                    self.answer(refusal(body_error(route.body_limit), route.errors), linger=True)
                    return
            elif isinstance(event, h11.EndOfMessage):
                self._dispatch()
            elif isinstance(event, h11.ConnectionClosed):
                self._close()
                return

    def _dispatch(self) -> None:
        event = self._request
        assert event is not None
        self.busy = True
        self._cancel_deadline()
        headers = tuple((name.decode("latin-1"), value.decode("latin-1")) for name, value in event.headers)
        body = b"".join(self._body)
        self._release_parser()
        request = Request(event.method.decode("latin-1"), utf8(event.target.decode("latin-1")), headers,
                          body, self.client)
        self._task = asyncio.ensure_future(self._answer(request))

    async def _answer(self, request: Request) -> None:
        try:
            answer = await self.host.dispatch(request, self)
        except asyncio.CancelledError:
            raise                                    # the client left: nothing to answer
        except Exception as exc:  # noqa: BLE001 - a bug answers 500 and one line, never a hang or a traceback
            self.host.access(f"{self.client} error answering {request.method} {request.target[:200]}: "
                             f"{type(exc).__name__}: {exc}")
            answer = text_answer(500, "internal error: the answer could not be built")
        if answer is not None:                       # None: an event stream took over the connection
            self.answer(answer, request=request)

    # -- answers -------------------------------------------------------------------
    def answer(self, answer: Answer, *, request: Request | None = None, log: bool = True,
               linger: bool = False) -> None:
        """Write ``answer`` whole (no body for HEAD) and close the connection.

        ``linger``: the request was refused before it was read whole, so the
        connection is half-closed (a FIN after the answer) and what the client
        still sends is read and dropped for up to ``LINGER_S`` before it is
        closed: closing with unread bytes would make the kernel send a reset,
        which can destroy the answer before the client reads it.
        """
        if self.closed or self.transport is None:
            return
        self.busy = True
        self._cancel_deadline()
        head_only = request is not None and request.method == "HEAD"
        body = b"" if head_only or answer.status in (204, 304) else answer.body
        length = () if answer.status in (204, 304) else (("Content-Length", str(len(answer.body))),)
        self.transport.write(head_bytes(answer.status, (*answer.headers, *length)) + body)
        if log:
            self.log(request, answer.status, len(body))
        if linger and self.transport.can_write_eof():
            self._lingering = True
            self.transport.write_eof()
            self.loop.call_later(LINGER_S, self._close)
            return
        self._close()

    def log(self, request: Request | None, status: int, size: int) -> None:
        line = "-" if request is None else f"{request.method} {request.target[:200]}"
        self.host.access(f'{self.client} "{line}" {status} {size}')

    def _too_slow(self) -> None:
        self._deadline = None
        if not self.busy:      # slowloris, or an idle connection: its time is up
            self._close(abort=True)

    def shed(self) -> None:
        """Close this connection, which has not sent its request line, to give its slot to a new one."""
        self._close(abort=True)

    def _release_parser(self) -> None:
        """The request is read: let go of the parser's buffer, the head and the body's pieces now, not when
        the connection is collected (a stream can hold it for minutes; a burst of 1 MiB bodies held so is
        gigabytes)."""
        self._h11 = _DONE
        self._head = b""
        self._body = []

    def _cancel_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _close(self, abort: bool = False) -> None:
        if self.transport is not None and not self.closed:
            self.closed = True
            if abort:
                self.transport.abort()
            else:
                if self.wire is not None:
                    self.wire.flush()                   # frames held this turn go out before the close
                self.transport.close()

    def close_after(self, flush_s: float) -> None:
        """Close now, leaving ``flush_s`` for what is written to drain before the connection is aborted."""
        self._close()
        if self.transport is not None:
            self.loop.call_later(flush_s, self.transport.abort)


Dispatch = Callable[[Request, HttpConnection], Awaitable[Answer | None]]
