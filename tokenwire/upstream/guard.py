"""uvicorn's HTTP protocol held to ``tokenwire serve``'s request limits, for the proxy tokenwire runs on uvicorn.

Why: uvicorn's protocols keep a request's headers without bound and give a
request that never arrives whole all the time it wants.  An outside probe
held 3.3 GB in ``tokenwire proxy`` with 200 connections sending header lines
for ever, and 60 half-sent requests took every slot of ``--max-connections
60``: each real request then got a 503.  ``tokenwire serve`` refuses both
(``live/http.py``); the proxy is served by uvicorn, so the protocol it runs
gets serve's rules, the same limits and the same answers.

How this works: ``guarded(routes, request_timeout_s)`` makes a subclass of
the protocol uvicorn would pick (httptools' when it is installed, else
h11's) that

- reads each request's head through serve's ``precheck`` as it arrives
  (a request line past ``MAX_REQUEST_LINE`` 414, headers past
  ``MAX_HEADER_BYTES`` or ``MAX_HEADERS`` lines 431, a malformed line 400, a
  body its route would refuse 413 or 411, in the route's own error format),
  until its headers are complete: a head held is at most those limits and
  one read more;
- gives the request ``request_timeout_s`` to arrive whole, head and body,
  from the connection's start, never restarted by a byte: past it the
  connection is aborted, as serve aborts it.  A request read whole (its
  response may stream for hours) has no deadline;
- serves one request a connection, as serve does: the answer says
  ``Connection: close`` and the connection ends with it, so no request
  pipelined or kept alive behind the first escapes the head checks or the
  deadline (a client opens a connection a request, as an SSE reader does);
- tells serve's ``Trimmer`` how much a connection read when it closes, so
  that a burst of large bodies' memory is given back, as serve's
  connections do (three bursts of near-1 MiB bodies held 739 MB in the proxy
  after the bodies were gone; ``live/memory.py`` says why).  Here a trim
  collects the garbage first (``collect_and_trim``): httpx's request to the
  upstream, which carries the conversation, sits in reference cycles that
  only the collector frees, and ``malloc_trim`` alone gave nothing back.
"""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Callable
from typing import Any

import h11

from ..endpoints.routes import RouteTable
from ..live.head_checks import precheck
from ..live.http import LINGER_S, head_bytes
from ..live.memory import Trimmer, malloc_trim

__all__ = ["collect_and_trim", "guarded"]


def _base() -> type[Any]:
    """The protocol uvicorn's ``http="auto"`` picks: httptools' when it imports, else h11's."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
        return HttpToolsProtocol
    except ImportError:               # no httptools: uvicorn runs h11
        from uvicorn.protocols.http.h11_impl import H11Protocol
        return H11Protocol


def collect_and_trim() -> None:
    """A full collection, then the allocator's free pages given back (see the module); a collection alone where
    the C library has no ``malloc_trim``: one full collection's pause, once per burst."""
    gc.collect()
    if malloc_trim is not None:
        malloc_trim()


def guarded(routes: RouteTable, request_timeout_s: float, base: type[Any] | None = None,
            trim: Callable[[], None] | None = collect_and_trim) -> type[asyncio.Protocol]:
    """The protocol class to give ``uvicorn.Config(http=...)``: uvicorn's (``base``: the one ``http="auto"``
    picks), held to ``routes``' head checks and to ``request_timeout_s`` for a request to arrive whole, its
    connections' bodies counted for ``trim`` (see the module).  Its hooks are httptools' (``on_headers_complete``,
    ``on_message_complete``) and h11's (``handle_events``): each base calls its own."""
    base = base if base is not None else _base()
    trimmers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Trimmer] = weakref.WeakKeyDictionary()  # a loop's

    def trimmer() -> Trimmer:
        loop = asyncio.get_running_loop()
        if loop not in trimmers:
            trimmers[loop] = Trimmer(loop, trim)
        return trimmers[loop]

    class Guarded(base):  # type: ignore[valid-type,misc]
        """uvicorn's HTTP protocol with serve's head limits and request timeout, one request a connection."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._head = bytearray()          # the request's head as it arrives, until its headers are complete
            self._heading = True              # its headers are not complete yet
            self._refused = False             # answered before it was read: what still comes is dropped
            self._deadline: asyncio.TimerHandle | None = None
            self._received = 0                # bytes this connection read (the trimmer counts them)

        def connection_made(self, transport: asyncio.Transport) -> None:
            super().connection_made(transport)
            self._deadline = asyncio.get_running_loop().call_later(request_timeout_s, self._too_slow)

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)
            trimmer().released(self._received)

        def data_received(self, data: bytes) -> None:
            self._received += len(data)
            if self._refused:
                return                        # read and dropped until the lingering close
            if self._heading:
                self._head += data
                early = precheck(bytes(self._head), routes)
                if early is not None:
                    self._refuse(early.status, early.headers, early.body)
                    return
            super().data_received(data)

        # httptools' protocol calls these as it parses.
        def on_headers_complete(self) -> None:
            self._headed()
            super().on_headers_complete()
            if self.cycle is not None:        # None: a protocol switch, which uvicorn hands on
                self.cycle.keep_alive = False     # its answer says Connection: close, and the connection ends with it

        def on_message_complete(self) -> None:
            self._disarm()                    # arrived whole: what it asked for may take as long as it takes
            super().on_message_complete()

        # h11's reads its events in one loop, with no hook for each: its peer's state says how far the request is.
        def handle_events(self) -> None:
            super().handle_events()
            state = self.conn.their_state
            if state is h11.IDLE:
                return
            if self._heading:
                self._headed()
                if self.cycle is not None:
                    self.cycle.keep_alive = False          # the connection ends with its answer
            if state is not h11.SEND_BODY:
                self._disarm()                # DONE, MUST_CLOSE (HTTP/1.0, Connection: close), a protocol switch

        def _headed(self) -> None:
            self._heading, self._head = False, bytearray()

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _too_slow(self) -> None:
            self._deadline = None
            if not self.transport.is_closing():
                self.transport.abort()        # slowloris, or a connection idle from its start: its time is up

        def _refuse(self, status: int, headers: tuple[tuple[str, str], ...], body: bytes) -> None:
            """Answer before the request is read (as serve: a FIN after the answer, what still comes read and
            dropped for ``LINGER_S``, then the close; closing on unread bytes would send a reset that can destroy
            the answer before the client reads it)."""
            self._disarm()
            self._headed()
            self._refused = True
            transport = self.transport
            transport.write(head_bytes(status, (*headers, ("Content-Length", str(len(body))),
                                                ("Connection", "close"))) + body)
            if transport.can_write_eof():
                transport.write_eof()
                asyncio.get_running_loop().call_later(LINGER_S, transport.close)
            else:
                transport.close()

    return Guarded

