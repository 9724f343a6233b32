"""An ASGI app under uvicorn in a thread of this process, on loopback; this module holds no tests.

``in_thread(app)`` serves ``app`` (its lifespan too) on 127.0.0.1 and a free
port and yields its base URL; the app's objects (its registry, its log) stay
in reach of the test.  On exit uvicorn is told to exit and the thread joined;
every wait is bounded.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import uvicorn

from support.live import wait_until

TIMEOUT_S = 10.0


@contextlib.contextmanager
def in_thread(app: Any, http: Any = "auto") -> Iterator[str]:
    """``app`` served by uvicorn in a thread (``http``: its HTTP protocol, a name or a class); yields
    ``http://127.0.0.1:<port>``."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", access_log=False,
                                           timeout_graceful_shutdown=1, http=http))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started or not thread.is_alive(), "uvicorn to start in its thread", TIMEOUT_S)
        assert server.started, "uvicorn stopped before it started"
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(TIMEOUT_S)
