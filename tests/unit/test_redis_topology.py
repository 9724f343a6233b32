"""Where the Redis log sends each call: the URL's node, or the node of a cluster serving its key's slot.

``Topology`` read from ``CLUSTER SLOTS`` replies and ``MOVED`` errors as Redis sends them, the key a command is
routed by, the split of many streams' keys into one group per slot, and the replies that redirect a call as
the writer's parser makes them (redis-py's ``MovedError``, ``AskError``, ``TryAgainError``).  No Redis here:
``tests/redis/test_redis_cluster.py`` runs a real cluster.
"""

from __future__ import annotations

import pytest
from redis.crc import key_slot
from redis.exceptions import AskError, MovedError, ResponseError, TryAgainError

from tokenwire.redislog.resp import _error
from tokenwire.redislog.topology import Topology, redirect, routing_key

# What a 3-node cluster answers CLUSTER SLOTS with (redis-server 7.0, decoded).
SLOTS = [[0, 5460, ["127.0.0.1", 7001, "id-1", {}]], [5461, 10922, ["127.0.0.1", 7002, "id-2", {}]],
         [10923, 16383, ["127.0.0.1", 7003, "id-3", {}]]]


def _node(key: str) -> str:
    slot = key_slot(key.encode())
    return next(f"127.0.0.1:{port}" for first, last, (_, port, *_), *_ in SLOTS if first <= slot <= last)


def test_everything_goes_to_the_urls_node_until_redis_says_it_is_a_cluster() -> None:
    topology = Topology("127.0.0.1:7001")
    assert topology.node_of("tokenwire:{a}:meta") == "127.0.0.1:7001" and not topology.known
    topology.learn(ResponseError("ERR This instance has cluster support disabled"))
    assert topology.known and not topology.cluster and topology.nodes() == {"127.0.0.1:7001"}
    assert topology.by_slot(["a", "b", "c"], lambda key: key) == [["a", "b", "c"]]


def test_a_clusters_slots_route_each_key_to_its_node() -> None:
    topology = Topology("127.0.0.1:7001")
    topology.learn(SLOTS)
    keys = [f"tokenwire:{{s{i}}}:tokens" for i in range(20)]
    assert topology.cluster and topology.nodes() == {"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"}
    assert [topology.node_of(key) for key in keys] == [_node(key) for key in keys]
    assert topology.node_of(None) == "127.0.0.1:7001"


def test_a_url_naming_the_node_otherwise_sends_keyless_calls_to_a_node_of_the_map() -> None:
    topology = Topology("localhost:7001")
    topology.learn(SLOTS)
    assert topology.home == "127.0.0.1:7001"


def test_many_streams_split_into_one_group_per_slot_each_in_order() -> None:
    topology = Topology("127.0.0.1:7001")
    topology.learn(SLOTS)
    keys = [f"tokenwire:{{s{i % 5}}}:meta" for i in range(15)]
    groups = topology.by_slot(keys, lambda key: key)
    assert len(groups) == 5 and sorted(key for group in groups for key in group) == sorted(keys)
    for group in groups:
        assert len({key_slot(key.encode()) for key in group}) == 1 and group == [k for k in keys if k in group]


def test_moved_moves_that_slot_and_makes_a_lone_redis_a_cluster() -> None:
    topology = Topology("127.0.0.1:7001")
    key = "tokenwire:{a}:meta"
    topology.moved(MovedError(f"{key_slot(key.encode())} 127.0.0.1:7009"))
    assert topology.cluster and topology.node_of(key) == "127.0.0.1:7009"
    assert topology.node_of("tokenwire:{zz}:meta") == "127.0.0.1:7001"        # the rest stays until the map says


@pytest.mark.parametrize(("args", "key"), [(("EVALSHA", "sha", 3, "k1", "k2", "k3", "arg"), "k1"),
                                           (("EVALSHA", "sha", 0, "arg"), None), (("GET", "k"), "k"),
                                           (("SET", "k", "v", "PX", 5), "k"), (("PING",), None),
                                           (("CLIENT", "UNBLOCK", 7), None), (("CLUSTER", "SLOTS"), None),
                                           (("CONFIG", "GET", "maxmemory-policy"), None)])
def test_the_key_a_command_is_routed_by(args: tuple[object, ...], key: str | None) -> None:
    assert routing_key(args) == key


def test_the_replies_that_redirect_a_call_are_read_as_redis_py_reads_them() -> None:
    moved, ask, again = _error("MOVED 3999 127.0.0.1:7002"), _error("ASK 12 10.0.0.2:7003"), _error("TRYAGAIN x")
    assert type(moved) is MovedError and (moved.slot_id, moved.host, moved.port) == (3999, "127.0.0.1", 7002)
    assert type(ask) is AskError and (ask.slot_id, ask.host, ask.port) == (12, "10.0.0.2", 7003)
    assert type(again) is TryAgainError
    assert all(redirect(reply) for reply in (moved, ask, again))
    assert not redirect(_error("ERR The ID specified in XADD is equal or smaller than the target stream top item"))
