"""Load and the limits that keep one machine alive: slowloris, abandoned streams, max_live, bounded memory
(one request trickled a byte at a time is ``test_http``'s).

The figures are module constants (the README's "Limits and errors" section
quotes them).  Each test measures this process's threads
(``threading.active_count``), open descriptors (``/proc/self/fd``) and
resident memory (``VmRSS``) before and after, and bounds the difference.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from multiprocessing import forkserver, resource_tracker

from support.live import (
    TIMEOUT_S,
    error_of,
    open_events,
    open_fds,
    raise_nofile,
    read_head,
    read_until_tokens,
    request,
    rss_kib,
    serving,
    still_open,
    token_ids,
    wait_until,
)

from tokenwire.core.clock import RealClock
from tokenwire.core.sse import Decoder
from tokenwire.core.tokenlog import MemoryTokenLog
from tokenwire.endpoints.registry import Registry

# -- slowloris ------------------------------------------------------------------------------------
SLOWLORIS_CONNECTIONS = 500
# Long enough that 500 connects and a few requests finish well inside it on
# a slow CI machine; the test's length is about this.
SLOWLORIS_TIMEOUT_S = 5.0
# Threads and descriptors the server may keep beyond its baseline once every
# connection is closed (a handler thread finishing its last line).
SLACK = 2


def _settled(baseline: int) -> bool:
    return threading.active_count() <= baseline + SLACK


def test_500_slowloris_connections_are_timed_out_and_others_are_served_meanwhile() -> None:
    raise_nofile(2 * SLOWLORIS_CONNECTIONS + 256)      # both ends of each connection live in this process
    # The page workers' fork server and resource tracker are this process's, from its first page on, and
    # hold pipes for its life: started first, so they are in the baseline whichever test came before.
    forkserver.ensure_running()
    resource_tracker.ensure_running()
    threads0, fds0 = threading.active_count(), open_fds()
    with serving(request_timeout_s=SLOWLORIS_TIMEOUT_S) as server:
        idle: list[socket.socket] = []
        try:
            for i in range(SLOWLORIS_CONNECTIONS):
                sock = socket.create_connection(server.address, timeout=TIMEOUT_S)
                if i % 2:        # half send nothing, half stop in the middle of their headers
                    sock.sendall(b"GET /live HTTP/1.1\r\nHost: x\r\nX-Slow: ")
                idle.append(sock)
            wait_until(lambda: len(server.connections) >= SLOWLORIS_CONNECTIONS,
                       "the server to accept every idle connection")
            # While all 500 are held: a stream, the report and a create are served in full.
            status, _, body = request(server, "GET", "/stream?tokens=20&producer_ms=0.1")
            report = request(server, "GET", "/?format=json&tokens=10")
            created = request(server, "POST", "/streams?tokens=10")
            open_meanwhile = sum(still_open(sock) for sock in idle)
            # Then every idle one is closed by the server, with no answer sent.
            wait_until(lambda: not any(still_open(sock) for sock in idle),
                       "the server to close every idle connection", SLOWLORIS_TIMEOUT_S + 30)
            answers = [sock.recv(1024) for sock in idle]
        finally:
            for sock in idle:
                sock.close()
        wait_until(lambda: _settled(threads0 + 1), "handler threads to end")    # +1: serve_forever
    assert open_meanwhile == SLOWLORIS_CONNECTIONS
    assert status == 200 and token_ids(body) == list(range(20))
    assert report[0] == 200 and json.loads(report[2])["params"]["tokens"] == 10
    assert created[0] == 201
    assert answers == [b""] * SLOWLORIS_CONNECTIONS
    wait_until(lambda: _settled(threads0), "threads back to the baseline")
    wait_until(lambda: open_fds() <= fds0 + SLACK, "descriptors back to the baseline")


# -- abandoned streams ------------------------------------------------------------------------------
ABANDONED_STREAMS = 1000
WAVE = 100                      # streams open at once (below the default max_live of 256)
WARMUP_STREAMS = 200            # fill the log to its cap first, so the baseline is the steady state
LOG_STREAMS = 200               # the token log's max_streams for this test
PRODUCER_MS = 20                # 277 tokens take 5.5 s: every stream is abandoned well before its end
RSS_GROWTH_BOUND_KIB = 16 * 1024


def _abandon(server: object, count: int) -> None:
    """Open ``count`` streams in waves, read 1-5 tokens of each (some mid-frame), then drop them."""
    for start in range(0, count, WAVE):
        socks = [open_events(server, f"/stream?tokens=277&producer_ms={PRODUCER_MS}")  # type: ignore[arg-type]
                 for _ in range(min(WAVE, count - start))]
        for i, sock in enumerate(socks, start):
            assert read_head(sock)[0] == 200
            read_until_tokens(sock, Decoder(), 1 + i % 5)
            if i % 3 == 0:          # a reset instead of a FIN, as a killed client or a proxy sends
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            sock.close()


def test_1000_abandoned_streams_leave_threads_descriptors_and_memory_at_the_baseline() -> None:
    raise_nofile(4 * WAVE + 256)
    clock = RealClock()
    registry = Registry(MemoryTokenLog(clock.now, max_streams=LOG_STREAMS), clock=clock, max_streams=LOG_STREAMS)
    threads0 = threading.active_count()
    with serving(registry) as server:
        def quiet() -> bool:
            return (registry.producers_running == 0 and registry.live == 0
                    and threading.active_count() <= threads0 + 1 + SLACK)

        _abandon(server, WARMUP_STREAMS)
        wait_until(quiet, "the warm-up streams to end")
        threads1, fds1, rss1 = threading.active_count(), open_fds(), rss_kib()
        evictions1 = registry.log.evictions          # type: ignore[attr-defined]
        _abandon(server, ABANDONED_STREAMS)
        wait_until(quiet, "every abandoned stream's threads to end", 60)
        wait_until(lambda: open_fds() <= fds1 + SLACK, "descriptors back to the baseline")
        threads2, fds2, rss2 = threading.active_count(), open_fds(), rss_kib()
        evictions2 = registry.log.evictions          # type: ignore[attr-defined]
        journal = list(server.journal)[-ABANDONED_STREAMS:]
        after = request(server, "GET", "/stream?tokens=10")
    assert threads2 <= threads1 + SLACK and fds2 <= fds1 + SLACK, (threads1, threads2, fds1, fds2)
    print(f"abandoned {ABANDONED_STREAMS}: threads {threads1}->{threads2}, fds {fds1}->{fds2}, "
          f"RSS {rss1}->{rss2} KiB")
    assert rss2 - rss1 <= RSS_GROWTH_BOUND_KIB, f"RSS grew {rss2 - rss1} KiB over {ABANDONED_STREAMS} streams"
    assert len(registry.log) <= LOG_STREAMS and len(registry) <= LOG_STREAMS      # type: ignore[arg-type]
    assert evictions2 - evictions1 == ABANDONED_STREAMS
    assert all(entry.generated < 277 for entry in journal)          # every one was abandoned mid-way
    assert after[0] == 200 and token_ids(after[2]) == list(range(10))


# -- the open-stream limit ----------------------------------------------------------------------------
MAX_LIVE = 8
FLOOD = 40


def test_past_max_live_streams_get_503_with_retry_after_and_a_slot_frees_when_one_ends() -> None:
    with serving(Registry(max_live=MAX_LIVE)) as server:
        held = [open_events(server, "/stream?tokens=50&producer_ms=50") for _ in range(MAX_LIVE)]
        try:
            for sock in held:
                assert read_head(sock)[0] == 200
            refused = [request(server, "GET", "/stream?tokens=5") for _ in range(3)]
            sid = json.loads(request(server, "POST", "/streams?tokens=5")[2])["stream_id"]
            refused_resume = request(server, "GET", f"/streams/{sid}/events")
            pages = request(server, "GET", "/live"), request(server, "GET", "/?tokens=5")
        finally:
            for sock in held:
                sock.close()
        wait_until(lambda: server.registry.live == 0, "the held slots to free")
        freed = request(server, "GET", f"/streams/{sid}/events")
    for status, headers, body in [*refused, refused_resume]:
        assert status == 503 and headers["retry-after"] == "1"
        assert error_of(body) == f"too many open streams: this server holds at most {MAX_LIVE}"
    assert [page[0] for page in pages] == [200, 200]         # pages are not streams: never refused
    assert freed[0] == 200 and token_ids(freed[2]) == list(range(5))


def test_a_flood_past_max_live_is_served_or_refused_never_hung() -> None:
    results: list[tuple[int, bytes]] = []
    lock = threading.Lock()
    with serving(Registry(max_live=MAX_LIVE)) as server:
        def client() -> None:
            status, _, body = request(server, "GET", "/stream?tokens=30&producer_ms=5")
            with lock:
                results.append((status, body))

        clients = [threading.Thread(target=client) for _ in range(FLOOD)]
        for thread in clients:
            thread.start()
        for thread in clients:
            thread.join(TIMEOUT_S * 3)
        peak = server.registry.peak_live
    assert len(results) == FLOOD
    assert {status for status, _ in results} <= {200, 503}
    served = [body for status, body in results if status == 200]
    assert len(served) >= MAX_LIVE and peak <= MAX_LIVE
    assert all(token_ids(body) == list(range(30)) for body in served)


# -- per-stream memory: bounded by the channel --------------------------------------------------------
CAPACITY = 4


def test_a_stalled_reader_holds_at_most_the_channel_and_the_log_at_most_the_answer() -> None:
    # The readers take nothing after the open event; their kernel buffers are
    # the smallest the kernel allows.  sample_queues keeps each stream's wire.
    with serving(write_timeout_s=30.0, sndbuf=1, sample_queues=True) as server:
        block = open_events(server, f"/stream?tokens=277&scenario=block&buffer={CAPACITY}", rcvbuf=1)
        drop = open_events(server, f"/stream?tokens=277&scenario=drop-oldest&buffer={CAPACITY}&producer_ms=0.1",
                           rcvbuf=1)
        try:
            block_id, drop_id = _stream_id_of(block), _stream_id_of(drop)
            log, wires, channel = server.registry.log, server.wires, server.registry.get(block_id).stream.channel
            assert channel is not None

            def waiting() -> tuple[int, int, int] | None:
                """(generated, sent, queued) while the block stream's writer waits on the kernel (``paused``) and
                its producer on the channel: full, and the log holds one token more than the channel was given
                (taken, or queued), the one the producer cannot queue."""
                generated, queued, taken = log.length(block_id), len(channel), channel.stats().delivered
                if wires[block_id].paused and queued == CAPACITY and generated == taken + queued + 1:
                    return generated, wires[block_id].snapshot()[1], queued
                return None

            # block: the kernel stops taking, the producer fills the channel behind it and waits on it.
            generated, sent, queued = wait_until(waiting, "the block producer to wait on its full channel")
            # drop-oldest: the producer runs to the end; the channel keeps the newest, the rest is dropped.
            wait_until(lambda: log.length(drop_id) == 277, "the drop-oldest producer to finish")
            wait_until(lambda: any(j.stream_id == drop_id for j in server.journal), "the drop-oldest stream to end")
            drop_stats = next(j.stats for j in server.journal if j.stream_id == drop_id)
            # block again: no further ahead for all the drop-oldest producer did meanwhile.
            ahead = log.length(block_id) - wires[block_id].snapshot()[1]
        finally:
            block.close()
            drop.close()
    # Ahead of what the kernel took: the channel, the frame in sendall and the token in the producer's hands.
    assert queued == CAPACITY and generated - sent <= CAPACITY + 2 and ahead <= CAPACITY + 2, (
        generated, sent, queued, ahead)
    assert drop_stats.high_water <= CAPACITY and drop_stats.dropped > 0
    assert drop_stats.delivered + drop_stats.dropped == 277


def _stream_id_of(sock: socket.socket) -> str:
    """Read the head and the open event (byte by byte: nothing more is taken off the wire)."""
    assert read_head(sock)[0] == 200
    decoder, got, deadline = Decoder(), [], time.monotonic() + TIMEOUT_S
    while not got and time.monotonic() < deadline:
        got = decoder.feed(sock.recv(1))
    assert got, "no open event"
    return str(json.loads(got[0].data)["stream_id"])
