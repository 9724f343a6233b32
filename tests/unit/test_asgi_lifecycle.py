"""A ``TokenStreams`` app in this process: its lifecycle (the exit signal it listens for, a new loop after an
exit), a HEAD request, and a server ``send`` that fails mid-stream.  Every wait is bounded."""

from __future__ import annotations

import asyncio
import signal
from typing import Any

import pytest
from support.live import await_until

from tokenwire.asgi import TokenStreams
from tokenwire.asgi.exiting import EXIT_SIGNALS, watch_exit

Message = dict[str, Any]


def _scope(method: str, target: str) -> Message:
    path, _, query = target.partition("?")
    return {"type": "http", "method": method, "path": path, "root_path": "", "query_string": query.encode(),
            "headers": [], "client": ("127.0.0.1", 1)}


async def _never() -> Message:
    await asyncio.Event().wait()
    return {"type": "http.disconnect"}


def test_an_ignored_exit_signal_is_not_listened_for() -> None:
    saved = {sig: signal.getsignal(sig) for sig in EXIT_SIGNALS}
    try:
        for sig in EXIT_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)

        async def main() -> bool:
            return watch_exit(lambda: None)
        assert asyncio.run(main()) is False
        assert all(signal.getsignal(sig) == signal.SIG_IGN for sig in EXIT_SIGNALS)
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def test_a_new_loop_after_an_exit_is_a_server_not_yet_told_to_exit() -> None:
    app = TokenStreams()
    saved = {sig: signal.getsignal(sig) for sig in EXIT_SIGNALS}
    try:
        for sig in EXIT_SIGNALS:
            signal.signal(sig, lambda signum, frame: None)      # the server's own handler, which exits later

        async def first() -> None:
            app.lifecycle.start()
            signal.raise_signal(signal.SIGTERM)                 # the server is told to exit
            await await_until(lambda: app.lifecycle.exiting, "the app to hear the exit")
        asyncio.run(first())
        assert app.lifecycle.exiting

        async def second() -> bool:
            app.lifecycle.start()
            return app.lifecycle.exiting
        assert asyncio.run(second()) is False
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def test_head_on_a_live_path_gets_the_headers_without_the_body() -> None:
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)
    asyncio.run(TokenStreams()(_scope("HEAD", "/stream"), _never, send))
    start, body = sent
    assert start["status"] == 405 and (b"allow", b"GET") in start["headers"]
    length = dict(start["headers"])[b"content-length"]
    assert int(length) > 0 and body["body"] == b""


class Boom(Exception):
    pass


def test_a_send_that_fails_mid_stream_gives_the_slot_back_and_lets_go_of_the_stream() -> None:
    app = TokenStreams()
    bodies = 0

    async def send(message: Message) -> None:
        nonlocal bodies
        if message["type"] == "http.response.body":
            bodies += 1
            if bodies == 3:
                raise Boom("the middleware's stream broke")

    async def main() -> None:
        with pytest.raises(Boom):
            await asyncio.wait_for(app(_scope("GET", "/stream?tokens=50&producer_ms=1"), _never, send), 10)
        await await_until(lambda: app.registry.live == 0 and not app.endpoints.writing,   # on the loop's next turns
                          "the writer's end to free the slot")
    asyncio.run(main())
    assert app.registry.live == 0 and not app.endpoints.writing


def test_a_websocket_is_refused_before_it_is_accepted_not_raised() -> None:
    """uvicorn answered a WebSocket upgrade 500 and logged the app's ValueError; now the app closes it first, which
    the server answers 403 (the ASGI spec's refusal)."""
    sent: list[Message] = []

    async def connect() -> Message:
        return {"type": "websocket.connect"}

    async def send(message: Message) -> None:
        sent.append(message)

    asyncio.run(TokenStreams(lambda request: iter(["x"]))({"type": "websocket", "path": "/streams", "headers": []},
                                                          connect, send))
    assert sent == [{"type": "websocket.close", "code": 1008, "reason": "tokenwire serves SSE over HTTP"}]
