"""The live server's routes: the report pages, and the live routes adapted to the endpoints.

How this works: ``Routes.dispatch`` is called by a connection with its
``Request``.  A live path (one of the endpoints' route table,
``endpoints.routes``) is handed to the endpoints (``tokenwire.endpoints``) as a
``LiveRequest``; their ``Answer`` is written as it is, and an ``OpenStream``
gets the connection's ``TransportWire`` after the ``200`` head.  The report
pages (``/``, ``/api/report``) are rendered by the serverless edge's pure
``respond`` in worker processes (``pages``), so a 10 ms render never stalls
the streams; the live page and its files are the endpoints' (``page``).

Every method on every path has one answer: a path that is not served is a
404 whatever the method, a served path asked with the wrong method a 405
with ``Allow``.
"""

from __future__ import annotations

from typing import Protocol

from ..endpoints.config import JOURNAL_SIZE, LiveConfig
from ..endpoints.decide import Endpoints, refusal
from ..endpoints.decisions import Answer, LiveRequest, OpenStream
from ..endpoints.page import page_answer
from ..endpoints.params import RequestError
from ..endpoints.rules import SSE_HEADERS
from ..handler import REPORT_PATHS, respond
from .http import HttpConnection, Request, head_bytes
from .pages import Pages
from .sockets import TransportWire, shrink_buffers

__all__ = ["Routes"]


class ServerState(Protocol):
    """What the routes read of their server (``LiveServer`` is one)."""

    endpoints: Endpoints
    config: LiveConfig
    wires: dict[str, TransportWire]


class Routes:
    """Answer requests for ``server``; pages render in ``pages`` processes, ``clock=real`` pages in ``real_pages``.

    The page processes (``Pages``) come from a fork server, start on the
    first page, and die with the server however it dies.
    """

    def __init__(self, server: ServerState, *, pages: int, real_pages: int) -> None:
        self.server = server
        self.pages = Pages(pages, real_pages)

    @property
    def in_flight(self) -> int:
        """Pages being rendered (a graceful shutdown waits for them)."""
        return self.pages.in_flight

    def close(self) -> None:
        """Stop the page processes (pages in flight were waited for by the shutdown)."""
        self.pages.close()

    async def dispatch(self, request: Request, connection: HttpConnection) -> Answer | None:
        """The answer to ``request``, or None once an event stream has taken the connection."""
        if self.server.endpoints.serves(request.path):
            return await self._live(request, connection)
        try:
            return await self._page_route(request)
        except RequestError as exc:
            return refusal(exc)

    async def _page_route(self, request: Request) -> Answer:
        path, method = request.path, request.method
        page = page_answer(path, method, self.server.config)     # the live page and its files: the endpoints'
        if page is not None:
            return page
        if path not in REPORT_PATHS:
            return _respond("GET", request.target)        # the report's 404, whatever the method
        if method not in ("GET", "HEAD"):
            return _respond(method, request.target)       # the report's own 405
        return await self.pages.render(request.target)

    # -- the live routes -------------------------------------------------------------
    async def _live(self, request: Request, connection: HttpConnection) -> Answer | None:
        live_request = LiveRequest(request.method, request.path, request.query, request.headers, request.client)

        async def body(limit: int) -> bytes:
            return request.body                          # read whole, and held to its limit, by the HTTP layer

        decision = await self.server.endpoints.decide(live_request, body)
        assert decision is not None
        if isinstance(decision, Answer):
            return decision
        if connection.closed:
            self.server.endpoints.release(decision)      # the client left while the log was asked
            return None
        try:
            self._write_stream(connection, request, decision)
        except BaseException:
            if connection.wire is None:
                self.server.endpoints.release(decision)      # the writer never started: its slot goes back
            connection.close_after(0)
            raise
        return None

    def _write_stream(self, connection: HttpConnection, request: Request, decision: OpenStream) -> None:
        server, transport = self.server, connection.transport
        assert transport is not None
        config = server.config
        if config.sndbuf is not None:
            shrink_buffers(transport.get_extra_info("socket"), sndbuf=config.sndbuf)
        transport.write(head_bytes(200, (*SSE_HEADERS, *decision.headers)))
        wire = TransportWire(transport, connection.loop, write_timeout_s=config.write_timeout_s,
                             sample=config.sample_queues, writes=server.endpoints.registry.loop_driver().writes)

        def ended() -> None:
            connection.log(request, 200, wire.bytes_sent)
            connection.close_after(config.write_timeout_s)

        wire.on_end = ended
        connection.wire = wire
        if config.sample_queues:
            server.wires[decision.live.stream_id] = wire
            while len(server.wires) > JOURNAL_SIZE:      # bounded like the journal
                server.wires.pop(next(iter(server.wires)))
        server.endpoints.write(decision, wire)


def _respond(method: str, target: str, *, served_live: bool = False) -> Answer:
    status, headers, body = respond(method, target, served_live=served_live)
    return Answer(status, tuple(headers), body)
