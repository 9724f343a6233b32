"""A finished connection of ``tokenwire serve`` lets go of everything it held, at once.

The request's parser buffer, its body and the connection itself are freed by
plain reference counts the moment the connection closes: no heartbeat timer
and no reference cycle keeps them for the garbage collector to find later
(a burst of 400 near-1 MiB ``POST /chat`` bodies was held so, gigabytes of
them).  And once enough large bodies have been released, the server asks the
allocator to give their pages back (``tokenwire.live.memory``).
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator

import pytest
from support.live import request, serving, wait_until

from tokenwire.live.http import HttpConnection
from tokenwire.live.memory import LARGE_BODY, TRIM_AFTER_BYTES, malloc_trim

BODY_TEXT = 200_000          # characters of one message: a body past LARGE_BODY, read in several pieces


def _chat_body(chat_id: str, size: int = BODY_TEXT) -> bytes:
    message = {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "x" * size}]}
    return json.dumps({"id": chat_id, "messages": [message], "trigger": "submit-message"}).encode()


@pytest.fixture
def no_gc() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _connections() -> list[HttpConnection]:
    return [o for o in gc.get_objects() if isinstance(o, HttpConnection)]


def test_finished_chat_connections_are_freed_without_the_garbage_collector(no_gc: None) -> None:
    with serving(heartbeat_s=60.0) as server:          # a heartbeat far past the test: its timer must not hold them
        for i in range(5):
            status, _, body = request(server, "POST", "/chat", {"Content-Type": "application/json"},
                                      _chat_body(f"chat-{i}"))
            assert status == 200 and b'"type":"finish"' in body
        wait_until(lambda: not server.connections, "the server to forget its connections")
        wait_until(lambda: not _connections(), lambda: f"connections still alive: {_connections()}", timeout_s=5.0)


def test_a_burst_of_large_bodies_ends_in_one_trim_of_the_allocator() -> None:
    if malloc_trim is None:
        pytest.skip("this C library has no malloc_trim: its allocator returns freed memory by itself")
    count = TRIM_AFTER_BYTES // BODY_TEXT + 2           # past the mark, in one burst
    with serving() as server:
        for i in range(count):
            status, _, _ = request(server, "POST", "/chat", {"Content-Type": "application/json"},
                                   _chat_body(f"burst-{i}"))
            assert status == 200
        trimmer = server.trimmer
        assert trimmer is not None
        wait_until(lambda: trimmer.trims >= 1, lambda: f"a trim after {count} bodies of {BODY_TEXT} bytes")
        assert trimmer.trims == 1, "one trim for the burst, not one per connection"


def test_small_bodies_never_trim() -> None:
    with serving() as server:
        for i in range(20):
            status, _, _ = request(server, "POST", "/chat", {"Content-Type": "application/json"},
                                   _chat_body(f"small-{i}", size=LARGE_BODY // 4))
            assert status == 200
        wait_until(lambda: not server.connections, "the server to forget its connections")
        assert server.trimmer is not None and server.trimmer.trims == 0
