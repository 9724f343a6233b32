"""Faults on the live server in this process: cut connections, stalled readers, evicted streams, racing threads (a
restart and a signal mid-stream: ``processes/test_serve_restart.py``).

Each test ends with the same check a client would make: the tokens it
holds, resumed from its last complete event id, are the whole answer,
each index once; or, when the stream is gone, a defined status that says so.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from support.live import (
    TIMEOUT_S,
    create,
    error_of,
    events,
    open_events,
    read_head,
    read_to_end,
    read_until_tokens,
    request,
    serving,
    token_ids,
    token_text,
    wait_until,
)

from tokenwire.core.clock import RealClock
from tokenwire.core.effects import TokenItem
from tokenwire.core.frames import token_frame
from tokenwire.core.model import ANSWER
from tokenwire.core.sse import Decoder
from tokenwire.core.stream import Ending
from tokenwire.core.tokenlog import MemoryTokenLog, UnknownStream
from tokenwire.endpoints.registry import Registry
from tokenwire.live.server import LiveServer

TOKENS = 30


def _resume(server: LiveServer, stream_id: str, last_id: str) -> tuple[int, bytes]:
    status, _, body = request(server, "GET", f"/streams/{stream_id}/events", headers={"Last-Event-ID": last_id})
    return status, body


# -- a connection cut in the middle of a frame -------------------------------------------------------
@contextlib.contextmanager
def cutting_proxy(upstream: tuple[str, int], frame: int, offset: int) -> Iterator[tuple[str, int]]:
    """A one-connection proxy that passes the response head, then the body's frames
    ``0..frame-1`` whole and ``offset`` bytes of frame ``frame``, and then closes both sides
    (as a proxy or a dropped network does)."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(TIMEOUT_S)

    def run() -> None:
        client, _ = listener.accept()
        with client, socket.create_connection(upstream, timeout=TIMEOUT_S) as server:
            client.settimeout(TIMEOUT_S)
            request = b""
            while b"\r\n\r\n" not in request:
                request += client.recv(4096)
            server.sendall(request)
            response = b""
            deadline = time.monotonic() + TIMEOUT_S
            while time.monotonic() < deadline:
                head, sep, body = response.partition(b"\r\n\r\n")
                frames = body.split(b"\n\n")
                if sep and len(frames) > frame + 1:       # frame `frame` is complete
                    break
                chunk = server.recv(4096)
                assert chunk, "the upstream stream ended before the cut"
                response += chunk
            else:
                raise AssertionError(f"no frame {frame} within {TIMEOUT_S} s")
            whole = b"".join(f + b"\n\n" for f in frames[:frame])
            client.sendall(head + sep + whole + (frames[frame] + b"\n\n")[:offset])

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[:2]
    finally:
        thread.join(TIMEOUT_S)
        listener.close()


CUT_TOKEN = 5          # cut inside token frame 5 (body frame 6: the open frame is frame 0)


def test_a_cut_anywhere_inside_a_frame_never_counts_it_and_the_resume_completes_the_answer() -> None:
    frame_len = len(token_frame(TokenItem(CUT_TOKEN, ANSWER[CUT_TOKEN])))
    outcomes = []
    with serving() as server:
        for offset in range(frame_len + 1):       # 0 and frame_len are the controls: on a boundary
            with cutting_proxy(server.address, CUT_TOKEN + 1, offset) as proxy:
                conn = http.client.HTTPConnection(*proxy, timeout=TIMEOUT_S)
                conn.request("GET", f"/stream?tokens={TOKENS}&scenario=block")
                response = conn.getresponse()
                decoder = Decoder()
                got = decoder.feed(response.read())     # read() ends at the proxy's close
                conn.close()
            stream_id = json.loads(got[0].data)["stream_id"]
            first = [e for e in got if e.event == "token"]
            status, rest = _resume(server, stream_id, decoder.last_event_id)
            outcomes.append((offset, [int(e.id) for e in first], decoder.last_event_id, status,
                             "".join(e.data for e in first) + token_text(rest), token_ids(rest)))
    for offset, ids, last_id, status, text, resumed in outcomes:
        held = CUT_TOKEN + (offset == frame_len)      # only a whole frame counts
        assert ids == list(range(held)), offset
        assert last_id == str(held - 1), offset
        assert status == 200 and resumed == list(range(held, TOKENS)), offset
        assert text == "".join(ANSWER[:TOKENS]), offset


# -- a client that stops reading ---------------------------------------------------------------------
WRITE_TIMEOUT_S = 0.5


def test_a_reader_that_stops_is_cut_by_the_write_timeout_the_producer_stops_and_the_resume_completes() -> None:
    with serving(write_timeout_s=WRITE_TIMEOUT_S, sndbuf=1) as server:
        stalled = open_events(server, "/stream?tokens=277&scenario=block&buffer=4", rcvbuf=1)
        try:
            assert read_head(stalled)[0] == 200
            # It reads nothing more.  Meanwhile another client is served in full.
            other = request(server, "GET", "/stream?tokens=10")
            wait_until(lambda: len(server.journal) >= 2, "the write timeout to cut the stalled reader")
            wait_until(lambda: server.registry.producers_running == 0, "the stalled stream's producer to stop")
            entry = next(j for j in server.journal if j.stream_id != json.loads(events(other[2])[0].data)["stream_id"])
            generated = server.registry.log.length(entry.stream_id)
            # The stalled client wakes up: what the kernel kept for it, then the server's close.
            decoder = Decoder()
            held = decoder.feed(read_to_end(stalled))
        finally:
            stalled.close()
        status, rest = _resume(server, entry.stream_id, decoder.last_event_id)
        final = server.registry.log.length(entry.stream_id)
    assert other[0] == 200 and token_ids(other[2]) == list(range(10))
    assert entry.ending is Ending.PEER_GONE and entry.failure is not None
    assert entry.failure.startswith(f"write timeout: nothing taken for {WRITE_TIMEOUT_S:g} s")
    assert generated < 277                                  # cancelled mid-way, not run to the end
    ids = [int(e.id) for e in held if e.event == "token"]
    assert ids == list(range(len(ids))) and decoder.last_event_id == str(len(ids) - 1)
    assert status == 200 and token_ids(rest) == list(range(len(ids), 277))
    assert "".join(e.data for e in held if e.event == "token") + token_text(rest) == "".join(ANSWER)
    assert final == 277


# -- the token log's caps: what a resume gets after eviction --------------------------------------------
def _gone_message(stream_id: str) -> str:
    return (f"unknown stream {stream_id!r}: never created here, evicted from the token log (too old or too many "
            f"streams), or lost when the server restarted; start a new one with POST /streams")


LOG_STREAMS = 3


def test_a_resume_of_a_stream_evicted_for_count_is_a_404_that_says_so() -> None:
    clock = RealClock()
    registry = Registry(MemoryTokenLog(clock.now, max_streams=LOG_STREAMS), clock=clock)
    with serving(registry) as server:
        first = create(server)
        _, _, body = request(server, "GET", f"/streams/{first}/events?cut_after=7")
        wait_until(lambda: registry.producers_running == 0, "the cut stream's producer to stop")
        kept = [create(server) for _ in range(LOG_STREAMS - 1)]
        for sid in kept:            # read and cut too: a never-read stream would be evicted before a cut one
            request(server, "GET", f"/streams/{sid}/events?cut_after=1")
        wait_until(lambda: registry.producers_running == 0, "the cut streams' producers to stop")
        held_before = first in registry.log                # type: ignore[operator]
        create(server)              # one more than the log holds: the least recently written goes
        status, headers, gone = request(server, "GET", f"/streams/{first}/events", headers={"Last-Event-ID": "6"})
        fresh = [_resume(server, sid, "0")[0] for sid in kept]
        evictions = registry.log.evictions             # type: ignore[attr-defined]
    assert token_ids(body) == list(range(7)) and held_before
    assert status == 404 and error_of(gone) == _gone_message(first)
    assert headers["content-type"] == "application/json" and headers["cache-control"] == "no-store"
    assert fresh == [200] * (LOG_STREAMS - 1)
    assert evictions == 1


MAX_AGE_S = 60


def test_a_resume_of_a_stream_past_the_log_age_is_a_404_even_if_nothing_was_created_since() -> None:
    clock, skew = RealClock(), [0]
    log = MemoryTokenLog(lambda: clock.now() + skew[0], max_age_ns=MAX_AGE_S * 1_000_000_000)
    with serving(Registry(log, clock=clock)) as server:
        sid = create(server)
        request(server, "GET", f"/streams/{sid}/events?cut_after=7")
        young = _resume(server, sid, "6")
        skew[0] = (MAX_AGE_S + 1) * 1_000_000_000      # the log's clock moves past the stream's age
        status, old = _resume(server, sid, "6")
    assert young[0] == 200 and token_ids(young[1]) == list(range(7, TOKENS))
    assert status == 404 and error_of(old) == _gone_message(sid)
    assert log.evictions == 1 and sid not in log


def test_a_resume_before_what_the_log_still_keeps_is_a_410_and_after_it_resumes() -> None:
    clock = RealClock()
    log = MemoryTokenLog(clock.now, max_tokens=10)
    with serving(Registry(log, clock=clock)) as server:
        sid = create(server)
        whole = request(server, "GET", f"/streams/{sid}/events")[2]
        status, _, trimmed = request(server, "GET", f"/streams/{sid}/events", headers={"Last-Event-ID": "5"})
        kept = _resume(server, sid, "24")
    assert token_ids(whole) == list(range(TOKENS)) and log.trimmed == TOKENS - 10
    assert status == 410
    assert error_of(trimmed) == (f"stream {sid!r} no longer holds the tokens after cursor 5: "
                                 f"the log keeps indices from {TOKENS - 10} on")
    assert kept[0] == 200 and token_ids(kept[1]) == list(range(25, TOKENS))


@pytest.mark.parametrize("cause", ["count", "age"])
def test_a_stream_evicted_while_it_is_read_ends_without_done_and_its_resume_is_a_404(cause: str) -> None:
    clock, skew = RealClock(), [0]
    max_streams = 1 if cause == "count" else 8
    log = MemoryTokenLog(lambda: clock.now() + skew[0], max_streams=max_streams, max_age_ns=MAX_AGE_S * 10**9)
    registry = Registry(log, clock=clock, max_streams=max_streams)
    with serving(registry, heartbeat_s=0.05) as server:
        sock = open_events(server, "/stream?tokens=60&producer_ms=50")
        try:
            assert read_head(sock)[0] == 200
            decoder = Decoder()
            got, _ = read_until_tokens(sock, decoder, 2)
            sid = json.loads(got[0].data)["stream_id"]
            if cause == "count":
                create(server)                          # the log holds one stream: the one being read goes
            else:
                skew[0] = (MAX_AGE_S + 1) * 10**9       # it outlives the log's age mid-stream
            got += decoder.feed(read_to_end(sock))      # ends (EOF), where it used to ping forever
        finally:
            sock.close()
        wait_until(lambda: registry.live == 0 and registry.producers_running == 0, "the evicted stream's threads")
        status, gone = _resume(server, sid, decoder.last_event_id)
        ending = next(j.ending for j in server.journal if j.stream_id == sid)
    ids = [int(e.id) for e in got if e.event == "token"]
    assert ids == list(range(len(ids))) and len(ids) < 60
    assert "done" not in [e.event for e in got]
    assert ending is not Ending.DONE
    assert status == 404 and error_of(gone) == _gone_message(sid)
    assert log.evictions == 1


# -- threads racing on the token log --------------------------------------------------------------------
RACE_STREAMS = 1000
RACE_WRITERS = 8
RACE_BUDGET_S = 1.5


def test_the_memory_log_takes_creates_and_appends_from_many_threads_at_once() -> None:
    # A server's request threads create streams while its producer threads
    # append; eviction used to iterate the table while an append reordered it
    # ("OrderedDict mutated during iteration": a dropped request).
    log = MemoryTokenLog(time.monotonic_ns, max_streams=RACE_STREAMS + 100)
    for i in range(RACE_STREAMS):
        log.create(f"s{i}", {}, 10**9)
    errors: list[BaseException] = []
    stop = time.monotonic() + RACE_BUDGET_S

    def append(stream_id: str) -> None:
        index = 0
        while time.monotonic() < stop and not errors:
            try:
                log.append(stream_id, index, "x")
            except UnknownStream:
                return          # evicted by the creates: expected, and counted
            except BaseException as exc:  # noqa: BLE001 - collected for the assertion
                errors.append(exc)
                return
            index += 1

    def create_many(prefix: str) -> None:
        n = 0
        while time.monotonic() < stop and not errors:
            try:
                log.create(f"{prefix}{n}", {}, 1)
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)
                return
            n += 1

    threads = [threading.Thread(target=append, args=(f"s{RACE_STREAMS - 1 - i}",)) for i in range(RACE_WRITERS)]
    threads += [threading.Thread(target=create_many, args=(prefix,)) for prefix in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(RACE_BUDGET_S + TIMEOUT_S)
    assert errors == []
    assert len(log) <= log.max_streams


def test_concurrent_creates_while_streams_produce_all_get_201() -> None:
    results: list[int] = []
    lock = threading.Lock()
    with serving() as server:
        readers = [open_events(server, "/stream?tokens=277&producer_ms=0.1") for _ in range(20)]

        def creator() -> None:
            for _ in range(25):
                try:
                    status = request(server, "POST", "/streams?tokens=5")[0]
                except (OSError, http.client.HTTPException) as exc:
                    status = -1
                    print("dropped:", exc)
                with lock:
                    results.append(status)

        creators = [threading.Thread(target=creator) for _ in range(4)]
        for thread in creators:
            thread.start()
        for thread in creators:
            thread.join(TIMEOUT_S * 3)
        bodies = [read_to_end(sock) for sock in readers]
        for sock in readers:
            sock.close()
    assert results == [201] * 100
    assert all(token_ids(body.partition(b"\r\n\r\n")[2]) == list(range(277)) for body in bodies)
