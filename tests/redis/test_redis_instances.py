"""Several ``tokenwire serve`` processes sharing one Redis: resume, failover after SIGKILL, Redis restart.

Each instance is a real process (``python -m tokenwire serve --port 0 --log
redis://...``) with a short lease so that a takeover comes within a second.
The reader is a raw loopback socket fed to the project's own SSE decoder.
Which instance generated each index is read back from the Redis stream
(every entry records its owner), so "each index once, A's prefix then B's
rest" is checked on the log itself, not only at the reader.
"""

from __future__ import annotations

import threading
import time

import pytest
from support.instances import LEASE_MS, Instance, Reply, create, log_at, owners, request, runs

from tokenwire.core.model import ANSWER


@pytest.fixture(params=["asyncio", "uvloop"])
def pair(redis_server, request):
    a, b = Instance(redis_server.url, "A", request.param), Instance(redis_server.url, "B", request.param)
    try:
        yield redis_server.url, a, b
    finally:
        a.kill()
        b.kill()


def test_cut_on_a_resumed_on_b_gives_the_exact_answer(pair):
    url, a, b = pair
    n = 60
    events = create(a, f"tokens={n}&producer_ms=2&scenario=block&cut_after=15")
    first = request(a.port, "GET", events)
    assert first.status == 200 and first.ids == list(range(15)) and not first.done
    second = request(b.port, "GET", events, last_event_id=first.ids[-1])
    assert second.status == 200 and second.done
    ids = first.ids + second.ids
    assert ids == list(range(n)) and "".join(first.texts + second.texts) == "".join(ANSWER[:n])
    made = runs(owners(url, events.split("/")[2], a, b))
    assert [name for name, _ in made] == ["A", "B"] and made[0][1] >= 15


def test_failover_after_sigkill_mid_generation(pair):
    url, a, b = pair
    n = 80
    events = create(a, f"tokens={n}&producer_ms=25&scenario=block")
    stream_id = events.split("/")[2]
    seen: dict[str, object] = {}

    def slow_then_kill(reply: Reply) -> None:
        # a reader slower than the model (40 ms a token against 25): A's log runs ahead of what it has read;
        # at the 20th token, with this connection still open (A's reader of record is attached, so nothing has
        # cancelled A's producer yet), read the log's length and lease, then SIGKILL A while it generates.
        if len(reply.ids) < 20:
            time.sleep(0.04)
            return
        seen["logged"], seen["owner"] = log_at(url).length(stream_id), log_at(url).owner(stream_id)
        a.kill()

    first = request(a.port, "GET", events, stop_after=20, on_token=slow_then_kill)
    logged_before_kill, lease_owner = seen["logged"], seen["owner"]
    assert not a.alive() and logged_before_kill < n
    assert lease_owner is not None and f":{a.pid}/" in lease_owner    # A held the lease when it died
    killed_at = time.monotonic()
    arrived: list[float] = []
    second = request(b.port, "GET", events, last_event_id=first.ids[-1],
                     on_token=lambda r: arrived.append(time.monotonic()))
    ids = first.ids + second.ids
    assert second.status == 200 and second.done
    assert ids == list(range(n)), f"duplicates or gaps: {ids}"
    assert "".join(first.texts + second.texts) == "".join(ANSWER[:n])
    made = runs(owners(url, stream_id, a, b))
    assert [name for name, _ in made] == ["A", "B"]
    print(f"\nfailover: A (pid {a.pid}) SIGKILLed after the reader had ids 0..{first.ids[-1]} "
          f"and A had logged {logged_before_kill} tokens; reconnect to B with Last-Event-ID: {first.ids[-1]}; "
          f"B replayed {made[0][1] - len(first.ids)} from the log, took over at index {made[0][1]} "
          f"once the {LEASE_MS} ms lease expired and generated {made[1][1]}; "
          f"reader got ids 0..{ids[-1]} ({len(ids)} tokens, {len(set(ids))} distinct), text exact; "
          f"log owners {made}; after the kill: first resumed token (replayed) at "
          f"{1000 * (arrived[0] - killed_at):.0f} ms, first token B generated at "
          f"{1000 * (arrived[made[0][1] - len(first.ids)] - killed_at):.0f} ms")


def test_reconnects_to_both_instances_at_once_generate_each_index_once(pair):
    url, a, b = pair
    n = 120
    events = create(a, f"tokens={n}&producer_ms=3&scenario=block&cut_after=10")
    first = request(a.port, "GET", events)
    assert first.ids == list(range(10))
    replies: dict[str, object] = {}

    def reconnect(inst: Instance) -> None:
        replies[inst.name] = request(inst.port, "GET", events, last_event_id=9)
    threads = [threading.Thread(target=reconnect, args=(inst,)) for inst in (a, b)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    for name in ("A", "B"):
        reply = replies[name]
        assert reply.status == 200 and reply.done, (name, reply)
        assert first.ids + reply.ids == list(range(n)), name
    made = runs(owners(url, events.split("/")[2], a, b))          # asserts each index logged exactly once
    assert sum(count for _, count in made) == n and len(made) <= 3


def test_redis_stopped_gives_503_then_recovers(own_redis):
    a, b = Instance(own_redis.url, "A"), Instance(own_redis.url, "B")
    try:
        events = create(a, "tokens=200&producer_ms=10&scenario=block")
        got: list[int] = []
        reading, ended = threading.Event(), []

        def read() -> None:
            reply = request(a.port, "GET", events, on_token=lambda r: reading.set())
            got.extend(reply.ids)
            ended.append(reply.done)
        reader = threading.Thread(target=read)
        reader.start()
        assert reading.wait(10)
        own_redis.stop()
        reader.join(15)
        assert not reader.is_alive() and ended == [False] and 0 < len(got) < 200   # the stream ended, without done
        assert got == list(range(len(got)))
        for inst, method, path, cursor in ((a, "POST", "/streams?tokens=10", None),
                                           (b, "GET", events, got[-1]), (a, "GET", events, got[-1])):
            down = request(inst.port, method, path, last_event_id=cursor)
            assert down.status == 503, (inst.name, method, down)
            assert down.headers["retry-after"] == "1"
            assert down.json() == {"error": "the token log is unavailable"}      # the host is not told
        assert a.alive() and b.alive()
        own_redis.start()                                          # back, and empty (no persistence)
        assert request(b.port, "GET", events, last_event_id=got[-1]).status == 404
        fresh = create(a, "tokens=30&producer_ms=1&scenario=block")
        reply = request(b.port, "GET", fresh)
        assert reply.status == 200 and reply.done and reply.ids == list(range(30))
    finally:
        a.kill()
        b.kill()
