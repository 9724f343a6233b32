"""A ``redis+sentinel://`` log URL and what the log reads of it, without a server: the sentinels, the service,
the primary's database and settings, the sentinels' own login (``sentinel_username``, ``sentinel_password``,
masked wherever the URL is shown), every malformed one refused naming it; which primary the sentinels' answers
name (the highest ``config-epoch`` of a majority, never one that is down); ``min_replicas``, and what a round's
``WAIT`` reply means.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest
from redis.asyncio.sentinel import MasterNotFoundError

from tokenwire.redislog import replicas, sentinel
from tokenwire.redislog.blocking import RedisTokenLog
from tokenwire.redislog.redact import redact_url
from tokenwire.redislog.streams import open_log

URL = ("redis+sentinel://tw:pw@10.0.0.1:26379,10.0.0.2:26380,[::1]:26381/mymaster/2"
       "?sentinel_password=sp&sentinel_username=watcher&socket_keepalive=true&lease_ms=900&min_replicas=1")


def test_a_sentinel_url_names_the_sentinels_the_service_and_the_primarys_settings() -> None:
    target = sentinel.parse(URL)
    assert target.sentinels == [("10.0.0.1", 26379), ("10.0.0.2", 26380), ("::1", 26381)]
    assert (target.service, target.db) == ("mymaster", 2)
    assert target.sentinel_kwargs == {"username": "watcher", "password": "sp"}
    kwargs = target.primary_kwargs
    assert (kwargs["username"], kwargs["password"], kwargs["db"], kwargs["socket_keepalive"]) == ("tw", "pw", 2, True)
    assert "host" not in kwargs and "port" not in kwargs
    assert sentinel.parse("redis+sentinel://h:1/svc").db == 0


@pytest.mark.parametrize(("url", "said"), [
    ("redis+sentinel:///mymaster", "log URL 'redis+sentinel:///mymaster' names no sentinel; expected "
                                   "redis+sentinel://host:port[,host:port...]/<service>"),
    ("redis+sentinel://h:1", "log URL 'redis+sentinel://h:1' names no service; expected "
                             "redis+sentinel://host:port[,...]/<service>[/<db>]"),
    ("redis+sentinel://h:1,h2/svc", "log URL 'redis+sentinel://h:1,h2/svc' names sentinel 'h2'; each is host:port"),
    ("redis+sentinel://h:x/svc", "log URL 'redis+sentinel://h:x/svc' names sentinel 'h:x'; each is host:port"),
    ("redis+sentinel://h:1/svc/one", "log URL 'redis+sentinel://h:1/svc/one' names database 'one'; a database is "
                                     "a number (/0)"),
    ("redis+sentinel://:secret@h:1/svc?socket_timeout=soon",
     "log URL 'redis+sentinel://:***@h:1/svc?socket_timeout=soon' is malformed: Invalid value for 'socket_timeout' "
     "in connection URL."),
])
def test_a_malformed_sentinel_url_is_refused_naming_it(url: str, said: str) -> None:
    with pytest.raises(ValueError) as refused:
        RedisTokenLog(url)
    assert str(refused.value) == said


def test_the_log_takes_its_own_settings_and_shows_no_secret() -> None:
    log = open_log(URL, lambda: 0)
    assert isinstance(log, RedisTokenLog)
    assert (log.lease_ms, log.min_replicas) == (900, 1)
    assert "lease_ms" not in log.url and "min_replicas" not in log.url
    assert log.where == ("redis+sentinel://tw:***@10.0.0.1:26379,10.0.0.2:26380,[::1]:26381/mymaster/2"
                         "?sentinel_password=***&sentinel_username=watcher&socket_keepalive=true")
    assert redact_url(URL).startswith(log.where.partition("?")[0])
    assert ":pw@" not in repr(log) and "=sp&" not in repr(log)


@pytest.mark.parametrize("value", ["-1", "one", "1.5"])
def test_min_replicas_is_a_non_negative_int(value: str) -> None:
    with pytest.raises(ValueError) as refused:
        RedisTokenLog(f"redis://h:1/0?min_replicas={value}")
    assert str(refused.value) == f"min_replicas must be a non-negative int, got {value!r}"
    assert RedisTokenLog("redis://h:1/0").min_replicas == 0


class _Answering:
    """A sentinel client that answers ``SENTINEL MASTER`` with ``state`` (or raises it)."""

    def __init__(self, state: dict[str, Any] | Exception) -> None:
        self.state = state

    async def execute_command(self, *args: object) -> dict[str, Any]:
        assert args[:2] == ("SENTINEL", "MASTER")
        if isinstance(self.state, Exception):
            raise self.state
        return self.state


def _master(port: int, epoch: int, flags: str = "master") -> dict[str, Any]:
    return {"name": "mymaster", "ip": "127.0.0.1", "port": str(port), "flags": flags, "config-epoch": str(epoch)}


def _discover(*answers: dict[str, Any] | Exception) -> tuple[str, int]:
    found = sentinel.Sentinels([("127.0.0.1", 1)], {})
    found.sentinels = [_Answering(answer) for answer in answers]
    return asyncio.run(found.discover_master("mymaster"))


def test_the_primary_is_the_newest_configurations_not_the_first_sentinels() -> None:
    # Right after a failover one sentinel still names the old primary, at the old epoch (seen on redis 7.0).
    assert _discover(_master(7000, 0), _master(7001, 1), _master(7001, 1)) == ("127.0.0.1", 7001)
    assert _discover(_master(7001, 1), ConnectionError("refused"), _master(7000, 0)) == ("127.0.0.1", 7001)


def test_no_primary_without_a_majority_of_sentinels_or_one_that_is_up() -> None:
    with pytest.raises(MasterNotFoundError) as few:
        _discover(_master(7000, 0), ConnectionError("refused"), ConnectionError("refused"))
    assert str(few.value) == "only 1 of 3 sentinels answered for 'mymaster': refused; refused"
    with pytest.raises(MasterNotFoundError) as down:
        _discover(_master(7000, 0, "master,s_down,o_down"), _master(7000, 0, "master,s_down"))
    assert str(down.value) == "the sentinels know no primary of 'mymaster' that is up (flags master,o_down,s_down)"


class _Settings:
    where = "redis://h:1/0"

    def __init__(self, min_replicas: int) -> None:
        self.min_replicas = min_replicas


def test_a_rounds_wait_must_count_min_replicas() -> None:
    settings: Any = _Settings(2)
    assert replicas.wait_command(settings, cluster=False) == b"*3\r\n$4\r\nWAIT\r\n$1\r\n2\r\n$3\r\n500\r\n"
    assert replicas.wait_command(_Settings(0), cluster=False) == b""  # type: ignore[arg-type]
    wait = replicas.wait_command(settings, cluster=False)
    replies = ["OK", 2]
    replicas.acknowledged(settings, replies, wait)
    assert replies == ["OK"]
    replicas.acknowledged(settings, replies, b"")        # no WAIT sent: nothing taken
    assert replies == ["OK"]
    with pytest.raises(replicas.TooFewReplicas) as few:
        replicas.acknowledged(settings, ["OK", 1], wait)
    assert str(few.value) == "min_replicas=2: 1 of them acknowledged within 500 ms"
    with pytest.raises(replicas.TooFewReplicas) as cluster:
        replicas.wait_command(settings, cluster=True)
    assert str(cluster.value) == ("min_replicas=2 is not supported on a Redis Cluster (a WAIT speaks for one "
                                  "node's writes)")


TLS_URL = "rediss+sentinel://h1:1,h2:2,h3:3/svc?ssl_cert_reqs=none&ssl_password=kp"


def test_a_tls_sentinel_url_speaks_tls_to_the_sentinels_and_the_primary() -> None:
    target = sentinel.parse(TLS_URL)
    assert target.sentinel_kwargs == {"ssl": True, "ssl_cert_reqs": "none", "ssl_password": "kp"}
    assert target.primary_kwargs["ssl"] is True and "connection_class" not in target.primary_kwargs
    assert "kp" not in redact_url(TLS_URL)
    with pytest.raises(ValueError, match="gives TLS settings to a plain connection"):
        sentinel.parse("redis+sentinel://h:1/svc?ssl_cert_reqs=none")


def test_the_clients_of_a_loop_share_its_sentinels_and_their_tls_context_until_the_log_closes() -> None:
    """One connection to each sentinel a loop whatever the clients' timeouts, each on one TLS context; closing
    lets go of them (a loop made later gets its own)."""
    async def scene() -> tuple[Any, Any]:
        one = sentinel.client(TLS_URL, socket_timeout=10.0, socket_connect_timeout=1.0)
        two = sentinel.client(TLS_URL, socket_timeout=1.0, socket_connect_timeout=1.0)
        shared = one.connection_pool.sentinel_manager
        assert two.connection_pool.sentinel_manager is shared
        assert one.connection_pool.connection_class is sentinel.PrimaryTLSConnection
        made = [one.connection_pool.make_connection(), two.connection_pool.make_connection(),
                *(cast(Any, s).connection_pool.make_connection() for s in shared.sentinels)]
        assert len({id(conn.ssl_context) for conn in made}) == 1
        await sentinel.close_sentinels()
        again = sentinel.client(TLS_URL, socket_timeout=1.0).connection_pool.sentinel_manager
        return shared, again
    shared, again = asyncio.run(scene())
    assert again is not shared
