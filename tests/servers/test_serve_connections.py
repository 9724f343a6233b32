"""The live server on one event loop, in this process: both loops, several readers, floods, the creation quota, IPv6,
real-clock pages past their limit (hundreds of connections: ``load/test_serve_many_connections.py``).

Every server binds loopback port 0 (IPv6 ``::1`` for that test) and runs in
this process, so its threads and connections can be counted.  Assertions
are about states and counts, never durations; every wait is bounded.  The
``loop_kind`` fixture (conftest) runs a test on both loops; strict HTTP is
``test_http``'s.
"""

from __future__ import annotations

import json
import socket
import threading

import pytest
from support.live import (
    TIMEOUT_S,
    create,
    error_of,
    in_thread,
    open_events,
    read_head,
    read_until_tokens,
    request,
    serving,
    token_ids,
    token_text,
    wait_until,
)

from tokenwire.core.model import ANSWER
from tokenwire.core.sse import Decoder
from tokenwire.core.tokenlog import MemoryTokenLog
from tokenwire.endpoints.config import LiveConfig
from tokenwire.endpoints.registry import Registry
from tokenwire.live.server import make_server


def test_both_loops_stream_resume_and_answer_pages(loop_kind: str) -> None:
    with serving() as server:
        sid = create(server, "tokens=40&producer_ms=0.2")
        status, _, first = request(server, "GET", f"/streams/{sid}/events?cut_after=9")
        _, _, rest = request(server, "GET", f"/streams/{sid}/events", headers={"Last-Event-ID": "8"})
        page = request(server, "GET", "/?format=json&tokens=10")
    assert status == 200 and token_ids(first) == list(range(9))
    assert token_ids(rest) == list(range(9, 40)) and token_text(first) + token_text(rest) == "".join(ANSWER[:40])
    assert page[0] == 200 and json.loads(page[2])["params"]["tokens"] == 10


def test_two_readers_of_one_stream_each_get_every_index_once(loop_kind: str) -> None:
    with serving() as server:
        sid = create(server, "tokens=60&producer_ms=2")
        bodies: list[bytes] = [b"", b""]

        def read(i: int) -> None:
            bodies[i] = request(server, "GET", f"/streams/{sid}/events")[2]
        readers = [threading.Thread(target=read, args=(i,)) for i in range(2)]
        for reader in readers:
            reader.start()
        for reader in readers:
            reader.join(TIMEOUT_S)
        late = request(server, "GET", f"/streams/{sid}/events", headers={"Last-Event-ID": "29"})[2]
        steps = server.registry.get(sid).stream.source.steps
    for body in bodies:
        assert token_ids(body) == list(range(60)) and b"event: done" in body
    assert token_ids(late) == list(range(30, 60))
    assert dict(steps) == {i: 1 for i in range(60)}         # one producer for both readers


def test_a_second_reader_follows_while_the_first_is_paced_by_a_small_buffer() -> None:
    with serving() as server:
        sid = create(server, "tokens=50&producer_ms=1&buffer=1")
        first = open_events(server, f"/streams/{sid}/events", rcvbuf=2048)
        try:
            assert read_head(first)[0] == 200
            second = request(server, "GET", f"/streams/{sid}/events")
            wait_until(lambda: server.registry.get(sid).stream.producer_running is False, "the producer to end")
            got, _ = read_until_tokens(first, Decoder(), 50)
        finally:
            first.close()
    assert token_ids(second[2]) == list(range(50))
    assert [int(e.id) for e in got if e.event == "token"] == list(range(50))


def test_a_creation_flood_does_not_evict_a_stream_cut_a_moment_ago() -> None:
    registry = Registry(MemoryTokenLog(lambda: 0, max_streams=50), max_streams=50)
    with serving(registry) as server:
        sid = create(server, "tokens=30")
        cut = request(server, "GET", f"/streams/{sid}/events?cut_after=5")[2]
        flood = [request(server, "POST", "/streams?tokens=30")[0] for _ in range(200)]
        resumed = request(server, "GET", f"/streams/{sid}/events", headers={"Last-Event-ID": "4"})
    assert token_ids(cut) == list(range(5)) and flood == [201] * 200
    assert resumed[0] == 200 and token_ids(resumed[2]) == list(range(5, 30))


def test_the_creation_quota_answers_429_and_a_refused_request_creates_nothing() -> None:
    with serving(Registry(create_burst=3, create_rate=0.5, max_live=1)) as server:
        made = [request(server, "POST", "/streams?tokens=5") for _ in range(4)]
    statuses = [m[0] for m in made]
    assert statuses == [201, 201, 201, 429]
    assert made[3][1]["retry-after"] == "2" and "too many new streams from 127.0.0.1" in error_of(made[3][2])
    with serving(Registry(max_live=1)) as server:
        held = open_events(server, "/stream?tokens=50&producer_ms=50")
        try:
            assert read_head(held)[0] == 200
            before = len(server.registry)
            refused = request(server, "GET", "/stream?tokens=5")
            after = len(server.registry)
        finally:
            held.close()
    assert refused[0] == 503 and refused[1]["retry-after"] == "1" and after == before


def test_ipv6_loopback_binds_and_serves() -> None:
    if not socket.has_ipv6:
        pytest.skip("this Python has no IPv6")
    try:
        server = make_server("::1", 0, config=LiveConfig(access_log=False))
    except OSError as exc:
        pytest.skip(f"no IPv6 loopback here: {exc}")
    with in_thread(server):
        assert server.url.startswith("http://[::1]:")
        status, _, body = request(server, "GET", "/stream?tokens=12&producer_ms=0.1")
        page = request(server, "GET", "/live")
    assert status == 200 and token_ids(body) == list(range(12)) and page[0] == 200


def test_clock_real_pages_past_their_limit_get_503_at_once_while_streams_go_on() -> None:
    with serving() as server:
        answers: list[tuple[int, dict[str, str], bytes]] = []
        lock = threading.Lock()

        def page() -> None:
            answer = request(server, "GET", "/?clock=real&format=json&tokens=40&reader_ms=1")
            with lock:
                answers.append(answer)
        pages = [threading.Thread(target=page) for _ in range(6)]
        for thread in pages:
            thread.start()
        stream = request(server, "GET", "/stream?tokens=30&producer_ms=1")
        for thread in pages:
            thread.join(60)
    statuses = sorted(a[0] for a in answers)
    assert set(statuses) <= {200, 503} and statuses.count(200) >= 2 and 503 in statuses, statuses
    assert all(a[1]["retry-after"] == "1" for a in answers if a[0] == 503)
    assert token_ids(stream[2]) == list(range(30))
