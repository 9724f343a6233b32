"""The Redis log at scale: a stream made on one process and first read on another, more than 100
streams on one process (redis-py's pool limit was 100), a Redis stall mid-stream, a stale owner's pending
flush.  Every server is a real process on a real ``redis-server``; the serve tests run on both event loops.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Callable

import httpx
import pytest
from support.asgi import read_stream, uvicorn
from support.instances import LEASE_MS, Instance, create, owners, request
from support.redis import client_ids, client_list, lease_expired, running_redis, until_a_new_read_blocks

from tokenwire.core.model import ANSWER
from tokenwire.core.sse import Decoder
from tokenwire.core.tokenlog import LeaseLost

LOOPS = ["asyncio", "uvloop"]
IO_TIMEOUT_S = 30.0
# How long Redis stays stopped: past a lease (400 ms) and a request's wait for Redis (1 s, then 503).
STALL_S = 2.0


def LoopInstance(log_url: str, name: str, loop: str) -> Instance:  # noqa: N802 - reads as the class it makes
    """``tokenwire serve`` on Redis with the event loop ``loop`` (``TOKENWIRE_LOOP``)."""
    return Instance(log_url, name, loop)


def _clients(port: int) -> int:
    """Connections Redis holds now, less the one asking."""
    return len(client_list(port)) - 1


class Progress:
    """What each reader of ``_many`` has had so far, for a thread that acts mid-stream (the Redis stall).

    ``begun`` is set once every reader has its first token, or once any reader ends before that (then
    ``ended`` says which): a thread waits on it instead of guessing how long the readers take to start.
    """

    def __init__(self, readers: int) -> None:
        self.tokens = [0] * readers
        self.ended = [False] * readers
        self.begun = threading.Event()
        self._waiting = readers

    def token(self, reader: int) -> None:
        self.tokens[reader] += 1
        if self.tokens[reader] == 1:
            self._waiting -= 1
            if not self._waiting:
                self.begun.set()

    def end(self, reader: int) -> None:
        self.ended[reader] = True
        self.begun.set()


async def _read(port: int, path: str, progress: Progress, reader_no: int) -> tuple[list[int], list[str], bool]:
    """One event stream read to its end: (ids, texts, done)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    decoder, ids, texts, done, head = Decoder(), [], [], False, b""
    try:
        while b"\r\n\r\n" not in head:
            chunk = await reader.read(65536)
            if not chunk:
                return ids, texts, done
            head += chunk
        rest = head.partition(b"\r\n\r\n")[2]
        while True:
            for event in decoder.feed(rest):
                if event.event == "token":
                    ids.append(int(event.id))
                    texts.append(event.data)
                    progress.token(reader_no)
                elif event.event == "done":
                    done = True
            rest = await reader.read(65536)
            if not rest:
                return ids, texts, done
    finally:
        progress.end(reader_no)
        writer.close()


def _many(port: int, paths: list[str], redis_port: int,
          during: Callable[[Progress], None] | None = None) -> tuple[list, int]:
    """Read every path at once; returns the results and the most Redis connections seen meanwhile.

    ``during(progress)`` runs in a thread alongside the readers (it waits on ``progress``, not a clock).
    """
    seen = [0]
    progress = Progress(len(paths))

    async def main() -> list:
        tasks = [asyncio.ensure_future(_read(port, path, progress, i)) for i, path in enumerate(paths)]
        while not all(task.done() for task in tasks):
            seen[0] = max(seen[0], await asyncio.to_thread(_clients, redis_port))
            await asyncio.sleep(0.2)        # sampling: how often Redis's connections are counted
        return [task.result() for task in tasks]
    if during is not None:
        threading.Thread(target=during, args=(progress,), daemon=True).start()
    return asyncio.run(asyncio.wait_for(main(), IO_TIMEOUT_S * 2)), seen[0]


# -- made on one process, first read on another ---------------------------------------------------------
@pytest.mark.parametrize("loop", LOOPS)
def test_a_canned_stream_made_on_a_and_first_read_on_b_is_whole_on_both(redis_server, loop):
    a, b = LoopInstance(redis_server.url, "A", loop), LoopInstance(redis_server.url, "B", loop)
    try:
        n = 40
        events = create(a, f"tokens={n}&producer_ms=2&scenario=block")
        on_b = request(b.port, "GET", events)
        on_a = request(a.port, "GET", events)
        again_b = request(b.port, "GET", events, last_event_id=n - 1)
        made = owners(redis_server.url, events.split("/")[2], a, b)      # asserts each index logged once
    finally:
        a.kill()
        b.kill()
    for reply in (on_b, on_a):
        assert reply.status == 200 and reply.done and reply.ids == list(range(n))
        assert "".join(reply.texts) == "".join(ANSWER[:n])
    assert again_b.status == 204
    assert made == ["B"] * n                         # generated once, by the process its first reader reached


def test_your_own_model_made_on_one_process_and_first_read_on_the_other_is_whole(redis_server):
    env = {"TOKENWIRE_TEST_LOG": f"{redis_server.url}?lease_ms={LEASE_MS}&block_ms=50"}
    with (uvicorn("support.apps.fake_model:app", env=env) as one,
          uvicorn("support.apps.fake_model:app", env=env) as other):
        made = httpx.post(f"{one.url}/tokens/streams?n=30&delay_ms=10")
        assert made.status_code == 201
        url = made.json()["events_url"]
        on_other = read_stream(other.url + url, timeout_s=20)            # the first reader: on the other process
        on_one = read_stream(one.url + url, timeout_s=20)
        stats = httpx.get(f"{one.url}/model/{made.json()['stream_id']}").json()
        resumed = httpx.get(other.url + url, headers={"Last-Event-ID": "29"})
    expected = "".join(f" t{i}" for i in range(30))
    for reply in (on_other, on_one):
        assert reply.status == 200 and reply.ids == list(range(30)) and reply.text == expected
        assert reply.last.event == "done" and "stopped_early" not in reply.last_json()
    assert stats == {"steps": 30, "yielded": 30, "finished": True, "closed": True}   # stepped once an index
    assert resumed.status_code == 204


# -- more streams than redis-py's pool, a handful of connections -------------------------------------------
@pytest.mark.parametrize("loop", LOOPS)
def test_more_than_100_streams_on_one_process_all_complete_on_a_few_connections(loop):
    with running_redis() as server:
        inst = LoopInstance(server.url, "A", loop)
        try:
            n, streams = 50, 150
            paths = [create(inst, f"tokens={n}&producer_ms=10&scenario=block") for _ in range(streams)]
            results, most = _many(inst.port, paths, server.port)
        finally:
            inst.kill()
    for ids, texts, done in results:
        assert done and ids == list(range(n)) and "".join(texts) == "".join(ANSWER[:n])
    print(f"\nmost Redis connections at once: {most}")
    assert 0 < most <= 8, most


# -- failures at scale -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("loop", LOOPS)
def test_a_redis_stall_pauses_every_stream_and_refuses_new_ones_with_503(loop):
    with running_redis() as server:
        inst = LoopInstance(server.url, "A", loop)
        try:
            n, streams = 150, 300
            paths = [create(inst, f"tokens={n}&producer_ms=20&scenario=block") for _ in range(streams)]
            refused: list[tuple[int, str, float]] = []
            at_stall: list[tuple[int, int]] = []        # (readers with a token, readers ended) as Redis stops
            spread: list[int] = []                      # the fewest and the most tokens a reader had then
            failed: list[BaseException] = []

            def stall(progress: Progress) -> None:
                """Redis stops once every stream is under way (each reader has its first token: none is
                still being attached, which needs Redis), for STALL_S, while a new stream is asked for."""
                try:
                    assert progress.begun.wait(IO_TIMEOUT_S * 2), "every reader's first token"
                    os.kill(server.proc.pid, signal.SIGSTOP)
                    at_stall.append((sum(1 for t in progress.tokens if t), sum(progress.ended)))
                    spread.extend((min(progress.tokens), max(progress.tokens)))
                    try:
                        started = time.monotonic()
                        reply = request(inst.port, "POST", "/streams?tokens=5")
                        refused.append((reply.status, reply.headers.get("retry-after", ""),
                                        time.monotonic() - started))
                        time.sleep(max(0.0, STALL_S - (time.monotonic() - started)))    # the stall's length
                    finally:
                        os.kill(server.proc.pid, signal.SIGCONT)
                except BaseException as exc:  # noqa: BLE001 - the test thread reports it
                    failed.append(exc)
            results, _ = _many(inst.port, paths, server.port, during=stall)
        finally:
            inst.kill()
    assert not failed, failed
    assert at_stall == [(streams, 0)], at_stall      # every stream had begun and none had ended when Redis stopped
    for ids, texts, done in results:
        assert done and ids == list(range(n)) and "".join(texts) == "".join(ANSWER[:n])   # none lost or repeated
    print(f"\nduring the stall: {refused}; tokens a reader had when Redis stopped: {spread} of {n}")
    assert len(refused) == 1 and refused[0][:2] == (503, "1"), refused


@pytest.mark.parametrize("loop", LOOPS)
def test_a_stale_owners_pending_flush_is_refused_whole(redis_server, loop, monkeypatch):
    from tokenwire.realtime import new_loop
    from tokenwire.redislog.blocking import RedisTokenLog
    monkeypatch.setenv("TOKENWIRE_LOOP", loop)
    a = RedisTokenLog(redis_server.url, name="A", lease_ms=200)
    b = RedisTokenLog(redis_server.url, name="B", lease_ms=200)
    ids = ["s1", "s2", "s3"]

    async def scene() -> list[object]:
        for sid in ids:
            await a.aio.create(sid, {}, 5)
            assert (await a.aio.claim(sid)).owned
            await a.aio.append(sid, 0, "a0")
            a.aio.disown(sid)                 # A pauses: nothing renews its leases
        await asyncio.to_thread(lease_expired, redis_server.url, *ids)     # until Redis lets them expire
        for sid in ids[:2]:                   # B takes two of them over and logs their next index
            assert (await b.aio.claim(sid)).owned
            await b.aio.append(sid, 1, "b1")
        rounds = a.aio.writer.rounds
        futures = [a.aio.append_future(sid, 1, "a1") for sid in ids]    # A wakes up: one pending flush
        got = await asyncio.gather(*futures, return_exceptions=True)
        assert a.aio.writer.rounds == rounds + 1
        for sid in ids:
            a.aio.disown(sid)
            b.aio.disown(sid)
        await a.aio.close()
        await b.aio.close()
        return got
    running = new_loop()
    try:
        got = running.run_until_complete(asyncio.wait_for(scene(), 30))
    finally:
        running.close()
    assert [type(r) for r in got] == [LeaseLost, LeaseLost, type(None)]   # refused where taken, never elsewhere
    assert [(i, t, by.split("/")[0]) for i, t, by in a.entries("s1")] == [(0, "a0", "A"), (1, "b1", "B")]
    assert [(i, t) for i, t, _ in a.entries("s3")] == [(0, "a0"), (1, "a1")]
    a.close()
    b.close()


# -- group commit --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("loop", LOOPS)
def test_one_round_carries_every_streams_append_and_a_refusal_fails_its_stream_alone(redis_server, loop,
                                                                                        monkeypatch):
    from tokenwire.realtime import new_loop
    from tokenwire.redislog.blocking import RedisTokenLog
    monkeypatch.setenv("TOKENWIRE_LOOP", loop)
    # A's lease outlasts the scene (its renewal timer, a third of it, never fires): no renewal round is
    # in flight when the appends are queued, so the round they take is theirs alone.
    a = RedisTokenLog(redis_server.url, name="A", lease_ms=600_000)
    b = RedisTokenLog(redis_server.url, name="B")
    ids = [f"s{i}" for i in range(200)]

    async def scene() -> tuple[list[object], int]:
        await asyncio.gather(*(a.aio.create(sid, {}, 3) for sid in ids))
        claims = await asyncio.gather(*(a.aio.claim(sid) for sid in ids))
        assert all(claim.owned for claim in claims) and len(a.aio.writer.renewal.owned) == 200
        await b.aio.command("DEL", b.keys("s7")[2])                      # s7's lease runs out, and B
        assert (await b.aio.claim("s7")).owned                             # claims it meanwhile
        b.aio.disown("s7")
        rounds = a.aio.writer.rounds                # A's writer is idle: its last round answered the claims
        got = await asyncio.gather(*(a.aio.append_future(sid, 0, f"t{sid}") for sid in ids),
                                   return_exceptions=True)
        used = a.aio.writer.rounds - rounds
        for sid in ids:
            a.aio.disown(sid)
        await a.aio.close()
        await b.aio.close()
        return got, used
    running = new_loop()
    try:
        got, used = running.run_until_complete(asyncio.wait_for(scene(), 30))
    finally:
        running.close()
    assert used == 1                                                       # 200 appends, one round trip
    assert isinstance(got[7], LeaseLost) and all(r is None for i, r in enumerate(got) if i != 7)
    assert [t for _, t, _ in a.entries("s8")] == ["ts8"] and a.entries("s7") == []
    a.close()
    b.close()


# -- followers share one read ---------------------------------------------------------------------------------
@pytest.mark.parametrize("loop", LOOPS)
def test_a_hundred_followers_share_one_blocking_read(redis_server, loop, monkeypatch):
    from tokenwire.realtime import new_loop
    from tokenwire.redislog.blocking import RedisTokenLog
    monkeypatch.setenv("TOKENWIRE_LOOP", loop)
    a = RedisTokenLog(redis_server.url, name="A")
    b = RedisTokenLog(redis_server.url, name="B", block_ms=2_000)
    ids = [f"f{i}" for i in range(100)]

    async def scene() -> tuple[list[list[tuple[int, str]]], int, int]:
        await asyncio.gather(*(a.aio.create(sid, {}, 3) for sid in ids))
        before = await asyncio.to_thread(_clients, redis_server.port)     # other tests' may linger: count ours
        known = await asyncio.to_thread(client_ids, redis_server.port)
        waits = [asyncio.ensure_future(b.aio.wait_after(sid, -1)) for sid in ids]
        await until_a_new_read_blocks(redis_server.port, known)         # every follower is waiting on Redis now
        assert not any(wait.done() for wait in waits)
        connections = await asyncio.to_thread(_clients, redis_server.port) - before
        await asyncio.gather(*(a.aio.append(sid, 0, f"t{sid}") for sid in ids))
        got = await asyncio.wait_for(asyncio.gather(*waits), 5)
        reads = b.aio.reader.reads
        await a.aio.close()
        await b.aio.close()
        return got, reads, connections
    running = new_loop()
    try:
        got, reads, connections = running.run_until_complete(asyncio.wait_for(scene(), 30))
    finally:
        running.close()
    assert got == [[(0, f"t{sid}")] for sid in ids]
    assert reads <= 5, reads                  # one XREAD over the hundred keys (a few when they join one by one)
    assert connections <= 2, connections      # B's one reader (and B's writer, if it interrupted a read)
    a.close()
    b.close()
