"""A log URL naming Redis Sentinels: which node is the primary, asked of the sentinels, never assumed.

How this works: ``redis+sentinel://[user:password@]host:port[,host:port...]/<service>[/<db>]`` names
the sentinels and the service they watch; the userinfo and the query's redis-py settings are the
primary's, ``sentinel_username`` and ``sentinel_password`` the sentinels' own (``parse``).
``rediss+sentinel://`` is the same over TLS, to the sentinels and to the primary alike, with the query's
``ssl_*`` settings (the CA, a client certificate and key, its passphrase) for both.  ``client``
makes a redis.asyncio client on redis-py's ``SentinelConnectionPool``, whose connections ask where the
primary is each time they connect (after any connection error: a killed primary, a ``READONLY`` the
writer turned into one, ``links``), so every process finds a new primary by itself after a failover.
Two things are stricter than redis-py's own:

- *The sentinels are asked together* (``Sentinels.discover_master``): every sentinel's ``SENTINEL
  MASTER``, and the answer with the highest ``config-epoch`` wins; a majority of them must answer.
  Right after a failover a sentinel may still name the old primary (at the old epoch) for a second or
  so, and an old primary that came back empty answers as a primary for ~10 s until a sentinel demotes
  it: redis-py's first sentinel's word could send writes there, and they would be lost.
- *The node must say it is the primary* (``PrimaryConnection``): a connection asks ``ROLE`` as it
  connects and drops a node that is not ``master``.

A connection that stays up is confirmed too: ``stale`` asks the sentinels again in the background at
most every ``CONFIRM_S``, and says so once they name another node (the writer drops the connection
before its next round), so a primary the sentinels demoted while it was reachable (a partition) is
written to at most that long after.
"""

from __future__ import annotations

import asyncio
import hashlib
import weakref
from typing import Any, cast
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

import redis.asyncio
from redis.asyncio.connection import RedisSSLContext, SSLConnection, parse_url
from redis.asyncio.sentinel import MasterNotFoundError, Sentinel, SentinelConnectionPool, SentinelManagedConnection
from redis.exceptions import ConnectionError as RedisConnectionError

from .redact import redact_url

__all__ = ["CONFIRM_S", "SCHEME", "TLS_SCHEME", "PrimaryConnection", "PrimaryTLSConnection", "Sentinels",
           "SharedTLSConnection", "Target", "client", "close_sentinels", "is_sentinel", "parse", "stale"]

SCHEME = "redis+sentinel://"
TLS_SCHEME = "rediss+sentinel://"
# The query settings that are the sentinels' own, not the primary's (the rest go to redis-py for the primary).
_SENTINEL_PARAMS = {"sentinel_username": "username", "sentinel_password": "password"}
# How often a connection that stays up asks the sentinels whether its node is still the primary: a sentinel
# failover takes a few seconds (down-after-milliseconds, then an election), so once a second notices it
# well within one; each look is one SENTINEL MASTER per sentinel per writer, nothing a sentinel feels.
CONFIRM_S = 1.0
# What the sentinels' answer must say of the primary to be taken: a master nobody thinks is down.
_DOWN_FLAGS = frozenset({"s_down", "o_down", "disconnected"})


def is_sentinel(url: str) -> bool:
    return url.startswith((SCHEME, TLS_SCHEME))


class Target:
    """What a sentinel URL names: the sentinels (``host``, ``port``), the service, the primary's database and
    connection settings (redis-py's keywords), the sentinels' login."""

    __slots__ = ("db", "primary_kwargs", "sentinel_kwargs", "sentinels", "service")

    def __init__(self, sentinels: list[tuple[str, int]], service: str, db: int, primary_kwargs: dict[str, Any],
                 sentinel_kwargs: dict[str, Any]) -> None:
        self.sentinels, self.service, self.db = sentinels, service, db
        self.primary_kwargs, self.sentinel_kwargs = primary_kwargs, sentinel_kwargs


def parse(url: str) -> Target:
    """``url`` as a ``Target``; raises ``ValueError`` naming what is wrong (the URL shown redacted)."""
    shown = redact_url(url)
    tls = url.startswith(TLS_SCHEME)
    rest = url[len(TLS_SCHEME if tls else SCHEME):]
    userinfo, at, after = rest.rpartition("@")
    hosts, _, path_query = after.partition("/")
    path, _, query = path_query.partition("?")
    service, _, db = path.partition("/")
    if not hosts:
        raise ValueError(f"log URL {shown!r} names no sentinel; expected {SCHEME}host:port[,host:port...]/<service>")
    sentinels = [_address(one, shown) for one in hosts.split(",")]
    if not service:
        raise ValueError(f"log URL {shown!r} names no service; expected {SCHEME}host:port[,...]/<service>[/<db>]")
    db = db.strip("/")
    if db and not (db.isascii() and db.isdigit()):
        raise ValueError(f"log URL {shown!r} names database {db!r}; a database is a number (/0)")
    settings = parse_qsl(query, keep_blank_values=True)
    own: dict[str, Any] = {_SENTINEL_PARAMS[key]: value for key, value in settings if key in _SENTINEL_PARAMS}
    passed = urlencode([(key, value) for key, value in settings if key not in _SENTINEL_PARAMS])
    try:      # redis-py reads the primary's settings as it reads any redis:// URL's (numbers, booleans)
        kwargs = dict(parse_url(f"{'rediss' if tls else 'redis'}://{userinfo}{at}{sentinels[0][0]}/{db or 0}?{passed}"))
    except ValueError as exc:
        raise ValueError(f"log URL {shown!r} is malformed: {exc}") from None
    for key in ("host", "port", "connection_class"):    # the pool's connections are PrimaryConnection's
        kwargs.pop(key, None)
    if tls:         # the sentinels are spoken to over TLS as the primary is, with the same certificates
        own = {"ssl": True, **{key: value for key, value in kwargs.items() if key.startswith("ssl_")}, **own}
        kwargs["ssl"] = True
    elif any(key.startswith("ssl_") for key, _ in settings):
        raise ValueError(f"log URL {shown!r} gives TLS settings to a plain connection; "
                         f"{TLS_SCHEME} speaks TLS to the sentinels and the primary")
    return Target(sentinels, unquote(service), int(db or 0), kwargs, own)


def _address(text: str, shown: str) -> tuple[str, int]:
    """One ``host:port`` of the sentinels (``[v6]:port`` too)."""
    try:
        parts = urlsplit(f"//{text}")
        host, port = parts.hostname, parts.port
    except ValueError:
        host = port = None
    if not host or port is None:
        raise ValueError(f"log URL {shown!r} names sentinel {text!r}; each is host:port")
    return host, port


class Sentinels(Sentinel):
    """redis-py's ``Sentinel``, asking every sentinel at once and trusting the newest configuration."""

    def __init__(self, sentinels: list[tuple[str, int]], sentinel_kwargs: dict[str, Any]) -> None:
        cast(Any, super()).__init__(sentinels, sentinel_kwargs={**sentinel_kwargs, "decode_responses": True})
        self._looks: dict[str, asyncio.Future[tuple[str, int]]] = {}
        for one in self.sentinels:           # over TLS, on the context every connection shares
            pool = cast(Any, one).connection_pool
            if issubclass(pool.connection_class, SSLConnection):
                pool.connection_class = SharedTLSConnection

    async def discover_master(self, service_name: str) -> tuple[str, int]:
        """The primary's address by the answer of the highest ``config-epoch`` among a majority of the
        sentinels; raises ``MasterNotFoundError`` (a ``ConnectionError``) saying why there is none.  Askers at
        once share one look: one connection to each sentinel, not one each (connections made together at
        start-up or after a failover)."""
        looking = self._looks.get(service_name)
        if looking is None:
            looking = self._looks[service_name] = asyncio.ensure_future(self._discover(service_name))
            looking.add_done_callback(lambda done: self._looked(service_name, done))
        return await asyncio.shield(looking)

    async def aclose(self) -> None:
        """Stop the looks under way and close the connections to the sentinels (made again if asked again)."""
        for looking in list(self._looks.values()):
            looking.cancel()
        for one in self.sentinels:
            await cast(Any, one).aclose()

    def _looked(self, service_name: str, done: asyncio.Future[tuple[str, int]]) -> None:
        """A look ended: the next asker asks again; its error is taken here too (its askers may all be gone)."""
        self._looks.pop(service_name, None)
        if not done.cancelled():
            done.exception()

    async def _discover(self, service_name: str) -> tuple[str, int]:
        answers = await asyncio.gather(*(cast(Any, one).execute_command("SENTINEL", "MASTER", service_name)
                                         for one in self.sentinels), return_exceptions=True)
        states = [_state(answer) for answer in answers if not isinstance(answer, BaseException)]
        if len(states) * 2 <= len(self.sentinels):
            errors = "; ".join(str(answer) for answer in answers if isinstance(answer, BaseException))
            raise MasterNotFoundError(f"only {len(states)} of {len(self.sentinels)} sentinels answered for "
                                      f"{service_name!r}: {errors}")
        newest = max(states, key=lambda state: int(state.get("config-epoch", 0)))
        flags = set(str(newest.get("flags", "")).split(","))
        if "master" not in flags or flags & _DOWN_FLAGS:
            raise MasterNotFoundError(f"the sentinels know no primary of {service_name!r} that is up "
                                      f"(flags {','.join(sorted(flags))})")
        return str(newest["ip"]), int(newest["port"])


def _state(answer: Any) -> dict[str, str]:
    """``SENTINEL MASTER``'s reply as a dict (a flat list in RESP2; redis-py may have parsed it already)."""
    pairs = answer.items() if isinstance(answer, dict) else zip(answer[::2], answer[1::2], strict=True)
    return {_text(key): ",".join(map(_text, value)) if isinstance(value, set) else _text(value) for key, value in pairs}


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class PrimaryConnection(SentinelManagedConnection):
    """A connection to where the sentinels say the primary is, kept only if the node says ``ROLE`` master."""

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        """Send ``command``, reconnecting through the sentinels if the connection dropped: redis-py's own
        reconnect here goes back to the last address (a dead or demoted primary)."""
        if not self.is_connected:
            await cast(Any, self).connect()
        await cast(Any, super()).send_packed_command(command, check_health)

    async def connect_to(self, address: tuple[str, int]) -> None:
        await cast(Any, super()).connect_to(address)
        await self.send_command("ROLE", check_health=False)
        role = await self.read_response()
        if not role or _text(role[0]) != "master":
            await self.disconnect()
            raise RedisConnectionError(f"{address[0]}:{address[1]}, named the primary by the sentinels, says it is "
                                       f"a {role[0] if role else 'nobody'!s}: not writing there")


class SharedTLSConnection(SSLConnection):
    """An ``SSLConnection`` on the TLS context of every other with the same settings: redis-py makes one a
    connection, and loading a client certificate with an encrypted key is tens of milliseconds of CPU (the
    sentinels' connections and the primary's, at start-up several at once).  A certificate replaced on disk
    is loaded at the process's next start."""

    def __init__(self, **kwargs: Any) -> None:
        cast(Any, super()).__init__(**kwargs)
        self.ssl_context = _shared_context(self.ssl_context)


class PrimaryTLSConnection(PrimaryConnection, SharedTLSConnection):
    """A ``PrimaryConnection`` over TLS (``rediss+sentinel://``)."""


# The TLS contexts in use, by a digest of their settings (the passphrase among them is kept nowhere else).
_CONTEXTS: dict[str, RedisSSLContext] = {}


def _shared_context(made: RedisSSLContext) -> RedisSSLContext:
    """The context of ``made``'s settings that connections share (``made`` itself the first time)."""
    settings = repr([getattr(made, name) for name in RedisSSLContext.__slots__ if name != "context"])
    return _CONTEXTS.setdefault(hashlib.sha256(settings.encode()).hexdigest(), made)


class PrimaryPool(SentinelConnectionPool):
    """The sentinel pool of ``PrimaryConnection``s, and when its connections' node was last confirmed."""

    def __init__(self, service_name: str, sentinel_manager: Sentinels, **kwargs: Any) -> None:
        kind = PrimaryTLSConnection if kwargs.pop("ssl", False) else PrimaryConnection
        cast(Any, super()).__init__(service_name, sentinel_manager, connection_class=kind, **kwargs)
        self.named: tuple[str, int] | None = None     # the primary the sentinels named at the last look
        self.looked_at = -CONFIRM_S
        self.looking: asyncio.Task[None] | None = None
        self._asked = 0                                # looks begun: an older one's answer is not taken

    async def get_master_address(self) -> tuple[str, int]:
        """Where to connect (redis-py asks it at each connect), kept as the last look."""
        self._asked += 1
        named: tuple[str, int] = await cast(Any, super()).get_master_address()
        self.named, self.looked_at = named, asyncio.get_running_loop().time()
        return named

    async def look(self) -> None:
        self._asked += 1
        asked = self._asked
        try:
            named = await self.sentinel_manager.discover_master(self.service_name)
            if asked == self._asked:
                self.named = named
        except Exception:  # noqa: BLE001 - no sentinel answers now: the connection stays; the next look asks again
            pass
        finally:
            self.looking = None


def client(url: str, **settings: Any) -> Any:
    """A redis.asyncio client of one connection to the primary the sentinels of ``url`` name, with the
    primary's ``settings`` (redis-py's keywords: timeouts, retry) over the URL's."""
    target = parse(url)
    pool = PrimaryPool(target.service, _sentinels(url, target, settings.get("socket_connect_timeout")),
                       **{**target.primary_kwargs, **settings})
    return redis.asyncio.Redis(connection_pool=pool)


# The sentinel managers in use, by event loop, then by URL: every client of one loop asks the sentinels over
# the same connections, kept open (``close_sentinels`` closes them with the log), rather than opening one to
# each sentinel per connection (over TLS with an encrypted key, a handshake and a key decryption each: most of
# a second at start-up).
_MANAGERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, Sentinels]] = weakref.WeakKeyDictionary()


def _sentinels(url: str, target: Target, timeout_s: float | None) -> Sentinels:
    """The running loop's ``Sentinels`` for ``url`` (a new one where no loop runs), whose calls wait at most
    ``timeout_s`` (a sentinel answers at once or not at all: never a blocking read's long timeout)."""
    try:
        managers = _MANAGERS.setdefault(asyncio.get_running_loop(), {})
    except RuntimeError:
        managers = {}
    if url not in managers:
        timeouts = {"socket_timeout": timeout_s, "socket_connect_timeout": timeout_s}
        managers[url] = Sentinels(target.sentinels, sentinel_kwargs={**timeouts, **target.sentinel_kwargs})
    return managers[url]


async def close_sentinels() -> None:
    """Close the running loop's connections to sentinels (made again if a sentinel log is used again)."""
    for made in _MANAGERS.pop(asyncio.get_running_loop(), {}).values():
        await made.aclose()


def home(redis_client: Any) -> str | None:
    """What a sentinel client's connections are said to go to (``<service> via sentinels``), None for another."""
    pool = redis_client.connection_pool
    return f"{pool.service_name} via sentinels" if isinstance(pool, PrimaryPool) else None


def stale(redis_client: Any, conn: Any) -> bool:
    """True if ``conn`` (of ``redis_client``'s pool) is up on a node the sentinels no longer name the primary
    at their last look; starts another look if the last is ``CONFIRM_S`` old.  False for another client."""
    pool = redis_client.connection_pool
    if not isinstance(pool, PrimaryPool) or not conn.is_connected:
        return False
    loop = asyncio.get_running_loop()
    if pool.looking is None and loop.time() - pool.looked_at >= CONFIRM_S:
        pool.looked_at = loop.time()
        pool.looking = loop.create_task(pool.look())
    named = pool.named
    return named is not None and (str(conn.host), int(conn.port)) != (str(named[0]), int(named[1]))
