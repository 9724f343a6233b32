"""``tokenwire serve``'s one event loop under many connections, in this process: 500 open streams add no thread, and
1,000 idle connections leave a page and a stream answered meanwhile.  Counts of threads and connections are
asserted, never durations; every wait is bounded.  (The same server under a few connections:
``servers/test_serve_connections.py``.)
"""

from __future__ import annotations

import socket
import threading

from support.live import (
    TIMEOUT_S,
    open_events,
    raise_nofile,
    read_head,
    read_until_tokens,
    request,
    serving,
    token_ids,
    wait_until,
)

from tokenwire.core.sse import Decoder
from tokenwire.endpoints.registry import Registry

# Threads the server may have beyond the one running its loop: the page pool's
# (made on demand, at most PAGE_THREADS), never one per connection or producer.
THREAD_SLACK = 4


def test_500_open_streams_add_no_thread() -> None:
    raise_nofile(2 * 500 + 256)
    threads0 = set(threading.enumerate())       # what earlier tests in this process left running may end any time
    with serving(Registry(max_live=600)) as server:
        request(server, "GET", "/?tokens=5")                  # the page pool has its thread before counting
        base = set(threading.enumerate())
        socks = [open_events(server, "/stream?tokens=277&producer_ms=100") for _ in range(500)]
        try:
            for sock in socks:
                assert read_head(sock)[0] == 200
            # A stream's slot is taken before its producer is spawned (a later loop turn): wait for both.
            wait_until(lambda: server.registry.live == 500 and server.registry.producers_running == 500,
                       "500 streams to be open, each with its producer running")
            during = set(threading.enumerate())
            producers = server.registry.producers_running
            ids = read_until_tokens(socks[-1], Decoder(), 3)[0]
        finally:
            for sock in socks:
                sock.close()
        wait_until(lambda: server.registry.live == 0 and server.registry.producers_running == 0,
                   "every stream and producer to end")
    added = [thread.name for thread in during - base]                  # threads started by the 500 streams
    assert not added and len(base - threads0) <= 1 + THREAD_SLACK, (added, [t.name for t in base - threads0])
    assert producers == 500 and [int(e.id) for e in ids if e.event == "token"][:3] == [0, 1, 2]


def test_1000_idle_connections_and_a_page_and_a_stream_answered_meanwhile() -> None:
    raise_nofile(2 * 1000 + 256)
    before = set(threading.enumerate())        # what earlier tests in this process left running is not ours
    with serving() as server:
        idle = [socket.create_connection(server.address, timeout=TIMEOUT_S) for _ in range(1000)]
        try:
            wait_until(lambda: len(server.connections) >= 1000, "the server to accept every idle connection")
            threads = set(threading.enumerate())
            page = request(server, "GET", "/live")
            report = request(server, "GET", "/?format=json&tokens=10")
            stream = request(server, "GET", "/stream?tokens=20&producer_ms=0.1")
        finally:
            for sock in idle:
                sock.close()
    assert page[0] == 200 and report[0] == 200 and token_ids(stream[2]) == list(range(20))
    added = [thread.name for thread in threads - before]       # the server's loop thread, no thread a connection
    assert len(added) <= 1 + THREAD_SLACK, added
