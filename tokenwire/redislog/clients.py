"""What the log's writer and reader read of its settings, their one-connection Redis clients, and their timeouts.

How this works: the writer (``writer``) and the followers' shared read
(``reader``) each talk to Redis on one connection of their own (one per
node of a cluster: ``topology``), made by ``client`` with the socket
timeout each can bear (for a ``redis+sentinel://`` URL, to the primary
its sentinels name: ``sentinel``).  Anything Redis does
wrong on either (down, stalled past the timeout, an error reply) becomes
``unavailable``'s ``LogUnavailable``, which names the host (redacted) and
never the password.
"""

from __future__ import annotations

from typing import Any, Protocol

import redis.asyncio
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from ..core.tokenlog import LogUnavailable
from . import sentinel
from .redact import scrub

__all__ = ["OP_TIMEOUT_S", "STALL_TIMEOUT_S", "Settings", "client", "home_of", "unavailable"]

# A request's wait for Redis before it is answered 503: Redis answers in well
# under a millisecond on a LAN, so a second means it is down or wedged.
OP_TIMEOUT_S = 1.0
# The writer's socket timeout: a Redis that stalls for less (a fork, a slow
# disk, SIGSTOP in the tests) pauses the streams, which then go on; past it
# the round fails and the streams end without `done` (their readers resume).
STALL_TIMEOUT_S = 10.0


class Settings(Protocol):
    """What the writer and reader read of the log: where Redis is, who this instance is, its settings."""

    url: str                # carries the password: only redis-py reads it
    where: str              # the URL as output shows it (``redact_url``)
    prefix: str             # every key's, ``<prefix>:...``
    owner_id: str
    lease_ms: int
    ttl_ms: int
    maxlen: int
    block_ms: int
    min_replicas: int       # replicas that must have a round before its askers are told (``replicas``)

    def keys(self, stream_id: str) -> tuple[str, str, str]: ...
    def kept_key(self, kind: str, key: str) -> str: ...


def client(settings: Settings, socket_timeout_s: float, node: str | None = None) -> Any:
    """A redis.asyncio client of one connection (its user never runs two commands at once), to the URL's
    Redis or to ``node`` (``host:port``, a cluster's: the URL's user, password and TLS settings, another address).

    Any: redis-py types every reply as a union of bytes/str/None whatever decode_responses says.
    """
    options: dict[str, Any] = {"decode_responses": True, "max_connections": 1, "socket_timeout": socket_timeout_s,
               "socket_connect_timeout": OP_TIMEOUT_S, "retry": Retry(NoBackoff(), 1)}   # one retry: a reconnect
    # (the asyncio Retry: redis-py 8 warns on stderr when an asyncio client is given the blocking one)
    if sentinel.is_sentinel(settings.url):
        return sentinel.client(settings.url, **options)     # to the primary the sentinels name, asked at connect
    made = redis.asyncio.Redis.from_url(settings.url, **options)
    if node is not None:
        host, _, port = node.rpartition(":")
        made.connection_pool.connection_kwargs.update(host=host, port=int(port))   # before any connection
    return made


def home_of(redis_client: Any) -> str:
    """The ``host:port`` a client made by ``client`` connects to (``unix`` for a local socket)."""
    named = sentinel.home(redis_client)
    if named is not None:
        return named
    kwargs = redis_client.connection_pool.connection_kwargs
    return f"{kwargs['host']}:{kwargs['port']}" if "host" in kwargs else "unix"


def unavailable(settings: Settings, exc: BaseException) -> LogUnavailable:
    """The operator's account of ``exc``: the host (``where`` is redacted), never the password; clients see less."""
    return LogUnavailable(f"redis at {settings.where}: {type(exc).__name__}: {scrub(str(exc), settings.url)}")
