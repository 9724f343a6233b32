"""A loopback HTTP server whose every answer is one SSE event that never ends: short ``data`` lines, no blank line.

``EndlessEvent()`` listens on 127.0.0.1 (``url``) in a thread; any request
(GET or POST, a body read by its ``Content-Length``) gets ``200
text/event-stream`` and then ``data: xy`` lines in 64 KiB writes, up to
``limit`` bytes (50 MB, as the probe sent), until the reader leaves.
``sent`` is how many bytes of lines went out, for a test to show the reader
stopped early.  A ``GET /short`` instead answers one whole ``token`` event
and ``done``, and a POST whose JSON ``model`` is ``short`` a one-token chat
completion stream: the baselines of a memory comparison.
"""

from __future__ import annotations

import socket
import socketserver
import threading
from types import TracebackType

from support.live import read_request

LINE = b"data: xy\n"
CHUNK = LINE * (65536 // len(LINE))
LIMIT_BYTES = 50_000_000
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n"
SHORT = b'id: 0\nevent: token\ndata: hi\n\nid: 1\nevent: done\ndata: {"total": 1}\n\n'
SHORT_CHAT = (b'data: {"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]}\n\n'
              b"data: [DONE]\n\n")


class EndlessEvent:
    """The server; a context manager that stops it."""

    def __init__(self, limit: int = LIMIT_BYTES) -> None:
        self.limit, self.sent = limit, 0
        owner = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                read = read_request(self.connection)
                if read is None:
                    return
                target, _, body = read
                short = SHORT if target.startswith("/short") else None
                if b'"model": "short"' in body or b'"model":"short"' in body:
                    short = SHORT_CHAT
                owner._answer(self.connection, short)

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def _answer(self, connection: socket.socket, short: bytes | None) -> None:
        try:
            connection.sendall(HEAD)
            if short is not None:
                connection.sendall(short)
                return
            while self.sent < self.limit:
                connection.sendall(CHUNK)
                self.sent += len(CHUNK)
        except OSError:
            return                                   # the reader left: what the test wants

    def __enter__(self) -> EndlessEvent:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)
