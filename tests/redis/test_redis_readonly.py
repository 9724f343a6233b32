"""A Redis the log writes to that becomes a replica under it (``REPLICAOF``: demoted by hand, or by a failover
the log's connection lived through) answers ``READONLY``: the round fails with that reason, and the log's
connection is dropped, so the next one asks again where to write (on a ``redis+sentinel://`` URL, the
sentinels) instead of writing on to a replica; once the node is a primary again the log writes there.
"""

from __future__ import annotations

import pytest
from support.live import wait_until
from support.redis import CONDITION_TIMEOUT_S, client_ids, redis_command, running_redis

from tokenwire.core.tokenlog import LogUnavailable
from tokenwire.redislog.blocking import RedisTokenLog


def _replication(url: str) -> dict[str, object]:
    return dict(redis_command(url, "INFO", "replication"))  # type: ignore[call-overload]


def test_a_node_demoted_under_the_log_fails_the_round_and_drops_the_connection() -> None:
    with running_redis() as node, running_redis() as other:
        log = RedisTokenLog(node.url)
        try:
            log.create("before", {"x": 1}, 5)
            connected = client_ids(node.port)
            redis_command(node.url, "REPLICAOF", "127.0.0.1", other.port)
            wait_until(lambda: _replication(node.url).get("master_link_status") == "up",
                       "the node to replicate the other", CONDITION_TIMEOUT_S)
            with pytest.raises(LogUnavailable) as refused:
                log.create("during", {"x": 1}, 5)
            said = str(refused.value)         # Redis's own words in between name the script it refused
            assert said.startswith(f"token log unavailable: redis at {node.url}: ReadOnlyError: the node answered "
                                   f"READONLY You can't write against a read only replica."), said
            assert said.endswith(": it is a replica now"), said
            assert connected - client_ids(node.port), "the writer's connection to the replica was kept"
            redis_command(node.url, "REPLICAOF", "NO", "ONE")
            log.create("after", {"x": 1}, 5)
            assert log.total("after") == 5
        finally:
            log.close()
