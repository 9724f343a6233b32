"""The floor for ``tokenwire serve``: a bare asyncio Protocol writing preformatted SSE frames on timers.

``python -m bench.floor_protocol PORT``: each request gets the head, then
one ``event: token`` frame per ``PRODUCER_MS`` (``tokens`` from the query,
as item 5's client asks), then ``event: done``; nothing else is done per
token, so its CPU per token is what the event loop and the socket cost.
"""

from __future__ import annotations

import asyncio
import sys
from urllib.parse import parse_qs, urlsplit

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n"
STEP_S = 0.020  # item 5's pacing: 20 ms per token


class _Stream(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: asyncio.Transport = transport  # type: ignore[assignment]
        self.buf = b""
        self.started = False

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if self.started or b"\r\n\r\n" not in self.buf:
            return
        self.started = True
        target = self.buf.split(b" ", 2)[1].decode("latin-1")
        self.tokens = int(parse_qs(urlsplit(target).query).get("tokens", ["277"])[0])
        self.next = 0
        self.transport.write(HEAD)
        self.loop = asyncio.get_running_loop()
        self.loop.call_later(STEP_S, self._tick)

    def _tick(self) -> None:
        if self.transport.is_closing():
            return
        if self.next < self.tokens:
            self.transport.write(b"event: token\nid: %d\ndata: t\n\n" % self.next)
            self.next += 1
            self.loop.call_later(STEP_S, self._tick)
        else:
            self.transport.write(b"event: done\ndata: {}\n\n")
            self.transport.close()


async def _main(port: int) -> None:
    server = await asyncio.get_running_loop().create_server(_Stream, "127.0.0.1", port, backlog=4096)
    await server.serve_forever()


if __name__ == "__main__":
    try:
        import uvloop
        uvloop.run(_main(int(sys.argv[1])))
    except ImportError:
        asyncio.run(_main(int(sys.argv[1])))
