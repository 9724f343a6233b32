"""Two ``tokenwire serve`` processes on a real 3-node Redis Cluster, the log URL naming one node.

The cluster is ``support.redis``'s: three cluster-enabled ``redis-server``s made one with
``redis-cli --cluster create`` (no replicas), waited until every node says ``cluster_state:ok``.  The
streams' ids are the server's, so their slots fall on every node; each test checks that they did.  What
is checked is on the readers and on the log itself (which process generated each index, read back from
the cluster): every stream whole and exact across instances, ``/chat`` and background responses, a
follower of streams on several nodes and slots, an owner of streams in several slots keeping its leases,
a slot migrated (``ASK``, then ``MOVED``) under a live stream, and each process's connections to each node.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis.crc import key_slot
from support.docs import marked_block
from support.instances import Reply, log_at, request
from support.live import wait_until
from support.redis import RedisClusterNodes, client_list, stream_keys
from support.tokenwire_process import Tokenwire, running_tokenwire

from tokenwire.core.model import ANSWER

# The lease here: a third of it apart the owner renews, so a renewal that fails lets another process take
# over within it (what the lease test would see); long enough that a loaded 2-core machine renews in time.
LEASE_MS = 1000
TIMEOUT_S = 30.0
# Readers at once in the 300-stream test (each a socket and a thread).
READERS = 24
# What a process may hold to each node: the log writer's connection and the followers' reader's.
MAX_CONNECTIONS_PER_NODE = 2


# The test's own log on the cluster (what it reads back), one a test: each log holds connections of its own.
_LOGS: dict[str, Any] = {}


def _log(cluster: RedisClusterNodes) -> Any:
    if cluster.url not in _LOGS:
        _LOGS[cluster.url] = log_at(cluster.url)
    return _LOGS[cluster.url]


@pytest.fixture(autouse=True)
def _close_logs() -> Iterator[None]:
    yield
    for log in _LOGS.values():
        log.close()
    _LOGS.clear()


@pytest.fixture
def pair(redis_cluster: RedisClusterNodes) -> Iterator[tuple[RedisClusterNodes, Tokenwire, Tokenwire]]:
    url = f"{redis_cluster.url}?lease_ms={LEASE_MS}&block_ms=50"
    with (running_tokenwire(["serve", "--port", "0", "--quiet", "--log", url]) as a,
          running_tokenwire(["serve", "--port", "0", "--quiet", "--log", url]) as b):
        yield redis_cluster, a, b


def _create(server: Tokenwire, query: str) -> str:
    made = request(server.port, "POST", f"/streams?{query}")
    assert made.status == 201, (made.status, made.body)
    return str(made.json()["stream_id"])


def _makers(cluster: RedisClusterNodes, stream_id: str, *servers: Tokenwire) -> list[int]:
    """Which server (its place in ``servers``) generated each index, from the log; every index once."""
    entries = _log(cluster).entries(stream_id)
    assert [i for i, _, _ in entries] == list(range(len(entries))), stream_id
    pids = [str(server.proc.pid) for server in servers]
    return [pids.index(by.split("/")[0].rpartition(":")[2]) for _, _, by in entries]


def _spread(cluster: RedisClusterNodes, stream_ids: list[str]) -> dict[int, int]:
    """How many of ``stream_ids`` each node (by port) serves."""
    ports = [cluster.node_of(stream_keys(cluster.url, sid)[0]).port for sid in stream_ids]
    return {port: ports.count(port) for port in set(ports)}


def _local_ports(pid: int) -> set[int]:
    """The local ports of process ``pid``'s established TCP sockets (its fds' inodes in /proc/net/tcp)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue                        # closed meanwhile
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    lines = [line.split() for line in Path("/proc/net/tcp").read_text().splitlines()[1:]]
    return {int(f[1].rpartition(":")[2], 16) for f in lines if f[3] == "01" and f[9] in inodes}   # 01: ESTABLISHED


def _connections(pid: int, port: int) -> int:
    """The connections the node on ``port`` lists (``CLIENT LIST``) from process ``pid``."""
    ports = _local_ports(pid)
    return sum(int(client["addr"].rpartition(":")[2]) in ports for client in client_list(port))


def _most_connections(cluster: RedisClusterNodes, servers: tuple[Tokenwire, ...], until: Callable[[], bool]
                      ) -> int:
    """The most connections any one node listed from any one of ``servers``, sampled until ``until()``."""
    most = 0
    while not until():
        most = max([most, *(_connections(s.proc.pid, node.port) for s in servers for node in cluster.nodes)])
    return most


def test_300_streams_across_slots_complete_through_two_instances_and_resume_exactly(pair) -> None:
    """Each stream cut on one instance and resumed on the other: every id once, the answer exact."""
    cluster, a, b = pair
    n, cut = 24, 9

    def one(k: int) -> tuple[str, Reply, Reply]:
        first_on, then_on = (a, b) if k % 2 else (b, a)
        stream_id = _create(first_on, f"tokens={n}&producer_ms=1&scenario=block&cut_after={cut}")
        first = request(first_on.port, "GET", f"/streams/{stream_id}/events")
        second = request(then_on.port, "GET", f"/streams/{stream_id}/events", last_event_id=first.ids[-1])
        return stream_id, first, second

    with ThreadPoolExecutor(READERS) as pool:
        done = list(pool.map(one, range(300)))
    for stream_id, first, second in done:
        assert first.status == 200 and first.ids == list(range(cut)) and not first.done, (stream_id, first)
        assert second.status == 200 and second.done, (stream_id, second.status, second.body)
        assert first.ids + second.ids == list(range(n)), stream_id
        assert "".join(first.texts + second.texts) == "".join(ANSWER[:n]), stream_id
    spread = _spread(cluster, [stream_id for stream_id, _, _ in done])
    assert sorted(spread) == sorted(node.port for node in cluster.nodes), spread       # every node served some
    assert all(set(_makers(cluster, stream_id, a, b)) <= {0, 1} for stream_id, _, _ in done[:20])


def test_chat_and_a_background_response_on_the_cluster(pair) -> None:
    """A chat made on one instance resumes on the other (its id's key in a slot of its own), and a background
    response made on one is completed and read on the other."""
    _, a, b = pair
    with (httpx.Client(base_url=a.url, timeout=TIMEOUT_S) as on_a,
          httpx.Client(base_url=b.url, timeout=TIMEOUT_S) as on_b):
        chat = on_a.post("/chat", json={"id": "chat-on-a-cluster", "messages": [], "tokens": 20, "producer_ms": 1})
        resumed = on_b.get("/chat/chat-on-a-cluster/stream", params={"startIndex": 0})
        made = on_b.post("/v1/responses", json={"model": "m", "input": "hi", "background": True, "tokens": 20,
                                                "producer_ms": 1})
        assert made.status_code == 200, made.text
        response_id = made.json()["id"]
        wait_until(lambda: on_a.get(f"/v1/responses/{response_id}").json()["status"] == "completed",
                   "the background response completed, as read on the other instance", TIMEOUT_S)
        record = on_a.get(f"/v1/responses/{response_id}").json()
    assert chat.status_code == 200 and chat.text.rstrip().endswith("data: [DONE]"), chat.text
    deltas = [json.loads(line[6:])["delta"] for line in chat.text.splitlines()
              if line.startswith("data: {") and '"text-delta"' in line]
    assert "".join(deltas) == "".join(ANSWER[:20])
    assert resumed.status_code == 200 and resumed.text == chat.text, resumed.text
    text = "".join(part["text"] for item in record["output"] for part in item.get("content", []))
    assert text == "".join(ANSWER[:20]), record


def test_a_follower_of_streams_on_several_nodes_and_slots_gets_every_done(pair) -> None:
    """B follows 9 streams A generates (on 3 nodes: one node holds two slots or more), each to its ``done``;
    meanwhile neither process holds more than two connections to any node."""
    cluster, a, b = pair
    n = 60
    ids = [_create(a, f"tokens={n}&producer_ms=20") for _ in range(9)]
    assert max(_spread(cluster, ids).values()) >= 2
    owners = [threading.Thread(target=request, args=(a.port, "GET", f"/streams/{sid}/events"), daemon=True)
              for sid in ids]
    for thread in owners:
        thread.start()                  # A's reader arrives first: A generates
    wait_until(lambda: all(len(_log(cluster).entries(sid)) >= 3 for sid in ids), "A generating every stream")
    with ThreadPoolExecutor(len(ids)) as pool:
        followed = pool.map(lambda sid: request(b.port, "GET", f"/streams/{sid}/events"), ids)
        most = _most_connections(cluster, (a, b), lambda: all(not t.is_alive() for t in owners))
        replies = list(followed)
    for sid, reply in zip(ids, replies, strict=True):
        assert reply.status == 200 and reply.done and reply.ids == list(range(n)), (sid, reply.ids, reply.body)
        assert _makers(cluster, sid, a, b) == [0] * n, sid          # A made it all: B only followed
    assert 1 <= most <= MAX_CONNECTIONS_PER_NODE, most


def test_an_owner_of_streams_in_several_slots_keeps_every_lease(pair) -> None:
    """A generates 3 streams (3 slots) for several leases' time while B reads them too: B never takes over."""
    cluster, a, b = pair
    n = 120                             # 120 x 25 ms: three seconds, three leases
    ids = [_create(a, f"tokens={n}&producer_ms=25") for _ in range(3)]
    assert len({key_slot(stream_keys(cluster.url, sid)[0].encode()) for sid in ids}) == 3
    with ThreadPoolExecutor(6) as pool:
        mine = [pool.submit(request, a.port, "GET", f"/streams/{sid}/events") for sid in ids]
        wait_until(lambda: all(_log(cluster).length(sid) >= 2 for sid in ids), "A generating all three")
        theirs = [pool.submit(request, b.port, "GET", f"/streams/{sid}/events") for sid in ids]
        replies = [f.result(TIMEOUT_S) for f in mine + theirs]
    assert all(reply.done and reply.ids == list(range(n)) for reply in replies)
    for sid in ids:
        assert _makers(cluster, sid, a, b) == [0] * n, sid          # no takeover mid-answer


def test_a_slot_migrated_under_a_live_stream_is_followed_with_no_503(pair) -> None:
    """The slot of a stream A generates (B follows it) moves to another node mid-answer: its keys migrate
    while the slot is MIGRATING (the source says ASK: A's appends land on the target after ASKING, a resume
    read there too), then the slot is the target's (the source says MOVED).  Every reader gets the whole
    answer, A made every index, and nothing answered 503."""
    cluster, a, b = pair
    n = 150                                 # 150 x 20 ms: three seconds, the migration inside them
    sid = _create(a, f"tokens={n}&producer_ms=20")
    meta, tokens, _ = stream_keys(cluster.url, sid)
    slot, source = key_slot(meta.encode()), cluster.node_of(meta)
    target = next(node for node in cluster.nodes if node is not source)
    with ThreadPoolExecutor(4) as pool:
        owner = pool.submit(request, a.port, "GET", f"/streams/{sid}/events")
        wait_until(lambda: _log(cluster).length(sid) >= 10, "A generating")
        follower = pool.submit(request, b.port, "GET", f"/streams/{sid}/events")
        moved = cluster.begin_migration(slot, source, target)
        assert tokens in moved
        at_migration = int(cluster.ask_importing(target.port, "XLEN", tokens))
        wait_until(lambda: int(cluster.ask_importing(target.port, "XLEN", tokens)) >= at_migration + 10,
                   "A's appends landing on the target while the slot migrates (ASK)")
        resumed = pool.submit(request, b.port, "GET", f"/streams/{sid}/events", last_event_id=4)
        made = [request(server.port, "POST", "/streams?tokens=3&producer_ms=1") for server in (a, b)]
        cluster.end_migration(slot, target)
        replies = [owner.result(TIMEOUT_S), follower.result(TIMEOUT_S), resumed.result(TIMEOUT_S)]
    assert [m.status for m in made] == [201, 201], [m.body for m in made]
    assert cluster.node_of(meta) is target
    for reply in replies:
        assert reply.status == 200 and reply.done, (reply.status, reply.body, reply.ids[-3:])
    assert replies[0].ids == replies[1].ids == list(range(n))
    assert replies[2].ids == list(range(5, n))
    assert "".join(replies[0].texts) == "".join(replies[1].texts) == "".join(ANSWER[:n])
    assert _makers(cluster, sid, a, b) == [0] * n


def test_a_user_with_the_docs_rule_on_every_node_serves_the_cluster(redis_cluster: RedisClusterNodes) -> None:
    """The docs' ACL rule, given on every node (a user is each node's own), is all two instances need on the
    cluster: streams over every node resumed across them, and a slot migrated under one (ASKING), with
    nothing refused."""
    cluster = redis_cluster
    words = marked_block("acl-rule", "text").split()
    rule = ["tw", "reset", *(">tw-pw" if word == ">pw" else word for word in words[3:])]
    for node in cluster.nodes:
        cluster.ask(node.port, "ACL", "SETUSER", *rule)
    url = f"redis://tw:tw-pw@127.0.0.1:{cluster.nodes[0].port}/0?lease_ms={LEASE_MS}&block_ms=50"
    try:
        with (running_tokenwire(["serve", "--port", "0", "--log", url]) as a,
              running_tokenwire(["serve", "--port", "0", "--log", url]) as b):
            ids = [_create(a, "tokens=12&producer_ms=1&scenario=block&cut_after=5") for _ in range(12)]
            while len(_spread(cluster, ids)) < len(cluster.nodes):       # ids are random: until every node has one
                assert len(ids) < 60, _spread(cluster, ids)
                ids.append(_create(a, "tokens=12&producer_ms=1&scenario=block&cut_after=5"))
            firsts = [request(a.port, "GET", f"/streams/{sid}/events") for sid in ids]
            rests = [request(b.port, "GET", f"/streams/{sid}/events", last_event_id=4) for sid in ids]
            live = _create(a, "tokens=100&producer_ms=20")
            meta = stream_keys(cluster.url, live)[0]
            source = cluster.node_of(meta)
            target = next(node for node in cluster.nodes if node is not source)
            with ThreadPoolExecutor(1) as pool:
                reading = pool.submit(request, b.port, "GET", f"/streams/{live}/events")
                wait_until(lambda: _log(cluster).length(live) >= 10, "the live stream generating")
                cluster.begin_migration(key_slot(meta.encode()), source, target)
                tokens = stream_keys(cluster.url, live)[1]
                at_migration = int(cluster.ask_importing(target.port, "XLEN", tokens))
                wait_until(lambda: int(cluster.ask_importing(target.port, "XLEN", tokens)) >= at_migration + 5,
                           "appends landing on the target after ASKING")
                cluster.end_migration(key_slot(meta.encode()), target)
                migrated = reading.result(TIMEOUT_S)
            said = a.output() + b.output()
    finally:
        for node in cluster.nodes:
            cluster.ask(node.port, "ACL", "DELUSER", "tw")
    assert len(_spread(cluster, ids)) == len(cluster.nodes)
    for first, rest in zip(firsts, rests, strict=True):
        assert first.ids + rest.ids == list(range(12)) and rest.done, (first.ids, rest.ids, rest.body)
    assert migrated.done and migrated.ids == list(range(100)), (migrated.ids[-3:], migrated.body)
    assert "may not use" not in said and "unavailable" not in said, said


def test_a_round_over_streams_on_every_node_is_one_round_trip_per_node(redis_cluster: RedisClusterNodes) -> None:
    """30 owned streams each append a token in one loop turn: one round, one exchange with each node (the
    group commit per node, not a round trip per stream), every token logged where its stream lives."""
    log = log_at(redis_cluster.url, "G")
    ids = [f"g{i}" for i in range(30)]

    async def scene() -> tuple[int, dict[str, int]]:
        for sid in ids:
            await log.aio.create(sid, {}, 5)
            assert (await log.aio.claim(sid)).owned
        writer = log.aio.writer
        rounds, before = writer.rounds, {node: link.exchanges for node, link in writer.links.items()}
        await asyncio.gather(*(log.aio.append_future(sid, 0, f"t-{sid}") for sid in ids))
        after = {node: link.exchanges - before.get(node, 0) for node, link in writer.links.items()}
        for sid in ids:
            log.aio.disown(sid)
        await log.aio.close()
        return writer.rounds - rounds, after
    try:
        rounds, exchanges = log._run(scene())
        assert all(log.read_after(sid, -1) == [f"t-{sid}"] for sid in ids)
    finally:
        log.close()
    assert len(_spread(redis_cluster, ids)) == len(redis_cluster.nodes)
    assert rounds == 1 and sorted(exchanges) == sorted(f"127.0.0.1:{n.port}" for n in redis_cluster.nodes)
    assert set(exchanges.values()) == {1}, exchanges


def test_a_stale_owners_round_is_refused_per_stream_on_every_node(redis_cluster: RedisClusterNodes) -> None:
    """A owns three streams on three nodes and stalls (nothing renews its leases); B takes two over.  A's next
    round of plain XADDs is refused on those two (their epoch is over) and looked at by ``REFUSED`` on each
    node, one call per slot: ``LeaseLost`` for those two, the third logged."""
    from tokenwire.core.tokenlog import LeaseLost
    cluster = redis_cluster
    by_node: dict[int, str] = {}
    for sid in (f"r{i}" for i in range(100)):
        by_node.setdefault(cluster.node_of(stream_keys(cluster.url, sid)[0]).port, sid)
    ids = list(by_node.values())
    a, b = log_at(cluster.url, "A", lease_ms=300), log_at(cluster.url, "B", lease_ms=300)

    async def scene() -> list[object]:
        for sid in ids:
            await a.aio.create(sid, {}, 5)
            assert (await a.aio.claim(sid)).owned
            await a.aio.append(sid, 0, "a0")
        a.aio.writer.renewal.stop()               # A stalls: it still takes itself for the owner
        await asyncio.to_thread(wait_until, lambda: all(b.owner(sid) is None for sid in ids), "A's leases lapsed")
        for sid in ids[:2]:
            assert (await b.aio.claim(sid)).owned
            await b.aio.append(sid, 1, "b1")
            b.aio.disown(sid)
        got = await asyncio.gather(*(a.aio.append_future(sid, 1, "a1") for sid in ids), return_exceptions=True)
        for sid in ids:
            a.aio.disown(sid)
        await a.aio.close()
        await b.aio.close()
        return got
    try:
        got = a._run(scene())
        logged = [[(i, t) for i, t, _ in a.entries(sid)] for sid in ids]
    finally:
        a.close()
        b.close()
    assert len(ids) == len(cluster.nodes)
    assert [type(r) for r in got] == [LeaseLost, LeaseLost, type(None)], got
    assert logged == [[(0, "a0"), (1, "b1")], [(0, "a0"), (1, "b1")], [(0, "a0"), (1, "a1")]]
