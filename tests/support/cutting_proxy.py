"""A loopback TCP proxy that cuts every connection after a few hundred bytes; this module holds no tests.

``CuttingProxy(upstream, limit)`` listens on 127.0.0.1 (any free port) and
forwards each connection to ``upstream``: the request as it comes, the
answer until ``limit`` bytes have gone back, then it closes both sides, in
the middle of whatever frame it is in.  Connections alternate between a
clean close (FIN: the client reads EOF) and a reset (RST, by
``SO_LINGER`` 0: the client gets a read error), so a client meets both.
``connections`` counts what it accepted and ``cut`` the connections it cut.
Every socket has a timeout; ``close()`` stops it and joins its threads.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from types import TracebackType

TIMEOUT_S = 10.0


class CuttingProxy:
    """Forward to ``upstream``, cutting each answer after ``limit`` bytes; ``url`` is its base URL."""

    def __init__(self, upstream: tuple[str, int], limit: int) -> None:
        self.upstream, self.limit = upstream, limit
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.2)
        self.connections = 0
        self.cut = 0
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._threads: list[threading.Thread] = []
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}"

    def _accept(self) -> None:
        while not self._closing.is_set():
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self.connections += 1
                number = self.connections
            thread = threading.Thread(target=self._serve, args=(client, number % 2 == 0), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, client: socket.socket, reset: bool) -> None:
        client.settimeout(TIMEOUT_S)
        try:
            server = socket.create_connection(self.upstream, timeout=TIMEOUT_S)
        except OSError:
            client.close()
            return
        up = threading.Thread(target=_pump_requests, args=(client, server), daemon=True)
        up.start()
        try:
            if self._answer(server, client):
                with self._lock:
                    self.cut += 1
        finally:
            with contextlib.suppress(OSError):
                client.shutdown(socket.SHUT_RD)          # wakes the request pump out of its recv
            if reset:
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            client.close()
            server.close()
            up.join(TIMEOUT_S)

    def _answer(self, server: socket.socket, client: socket.socket) -> bool:
        """Forward the answer up to ``limit`` bytes; True if it was cut there (False: it ended first)."""
        sent = 0
        while sent < self.limit:
            try:
                chunk = server.recv(min(65536, self.limit - sent))
            except OSError:
                return False
            if not chunk:
                return False
            try:
                client.sendall(chunk)
            except OSError:
                return False
            sent += len(chunk)
        return True

    def close(self) -> None:
        self._closing.set()
        self.listener.close()
        self._accepting.join(TIMEOUT_S)
        for thread in self._threads:
            thread.join(TIMEOUT_S)

    def __enter__(self) -> CuttingProxy:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def _pump_requests(client: socket.socket, server: socket.socket) -> None:
    """Forward what the client sends until it or the server closes."""
    while True:
        try:
            chunk = client.recv(65536)
            if not chunk:
                server.shutdown(socket.SHUT_WR)
                return
            server.sendall(chunk)
        except OSError:
            return
