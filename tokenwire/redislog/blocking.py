"""The token log on Redis Streams, shared by every tokenwire instance that points at the same Redis.

How this works: each stream has three keys, all with the stream id as a hash
tag (``{id}``) so that they live in one cluster slot and a Lua script may
touch them together:

- ``<prefix>:{id}:meta``, a hash: ``params`` (the JSON meta given to ``create``:
  what any instance needs to rebuild the stream), ``total``, ``state``
  (generating / done / cancelled), ``creator`` (the create call's token) and
  the epochs (each owner's turn: its number, owner and first index);
  the length (the next index) is the last entry's id, nothing written per token;
- ``<prefix>:{id}:tokens``, a Redis stream: token ``i`` appended in epoch
  ``e`` is the entry with id ``e-(i+1)`` and field ``t`` (the text).  "After
  cursor c" is the exclusive start ``e-(c+1)`` for ``XRANGE`` and ``XREAD``
  (``e`` from the meta's epochs), and Redis itself refuses a second ``XADD``
  of an index;
- ``<prefix>:{id}:lease``, a string: the owner id of the one instance allowed
  to generate, taken with a claim and renewed on a timer (``writer``).

The lease fences by epoch (``scripts``): a claim that changes the owner
starts a new epoch and moves the stream's last id past the old one's, so
an instance whose lease expired (it stalled, or was partitioned away) and
was taken over is fenced off by ``XADD`` itself, its append failing with
``LeaseLost`` instead of landing; the owner's appends cost one ``XADD``
each, nothing more.  An append without a claim is checked whole (the
lease, ``length`` as the index: ``IndexConflict`` otherwise, the total),
which with the epochs makes "never an index twice" hold across a lease
hand-over.  A retried append that already landed (the reply was lost) is
recognised and succeeds.

Memory is bounded per stream by ``MAXLEN``, trimmed exactly by the owner's
lease renewal rather than per append (a cursor before the first kept token
is a ``LogGap``, as in memory), and in time by a TTL set at
creation and re-armed by the owner's lease renewal and every state change;
the number of streams is bounded by that TTL times the creation rate (give
Redis a ``maxmemory`` for a hard cap).  Any error from Redis (down, timing
out, refusing writes) is raised as ``LogUnavailable``, which the server
answers with 503 and ``Retry-After``.

``RedisTokenLog`` holds the settings and is the blocking face of the one
implementation, ``AsyncRedisLog`` (``aio``): each blocking call runs the
coroutine on a private event loop of its own thread.  It is for tools,
tests and the sync registry path; code on an event loop awaits ``aio``.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
import threading
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar
from urllib.parse import SplitResult, parse_qsl, urlencode, urlsplit, urlunsplit

import redis

from ..core.tokenlog import (
    DEFAULT_MAX_AGE_NS,
    DEFAULT_MAX_TOKENS,
    LeaseLost,
    LogUnavailable,
    StreamState,
)
from . import replicas, sentinel
from .aio import AsyncRedisLog
from .clients import STALL_TIMEOUT_S
from .redact import redact_url, scrub
from .replies import Claim, entry_index
from .schemes import REDIS_SCHEMES, either

__all__ = [
    "DEFAULT_BLOCK_MS",
    "DEFAULT_LEASE_MS",
    "DEFAULT_MAXLEN",
    "DEFAULT_TTL_MS",
    "Claim",
    "LeaseLost",
    "RedisTokenLog",
]

T = TypeVar("T")

# How long an owner's lease lasts without renewal (renewed on a timer a third
# of it apart).  A crashed instance's streams are taken over this long after
# its last renewal: long enough to ride out a GC pause or a slow Redis round
# trip, short enough that a reconnect (EventSource waits `retry`, 750 ms)
# waits about one more retry for the takeover.
DEFAULT_LEASE_MS = 2_000
# A stream's keys live this long after their last write, as the in-memory
# log keeps a stream: a reconnect within ten minutes finds it.
DEFAULT_TTL_MS = DEFAULT_MAX_AGE_NS // 1_000_000
# Tokens kept per stream (exact MAXLEN), the in-memory log's bound.
DEFAULT_MAXLEN = DEFAULT_MAX_TOKENS
# A follower's heartbeat: it is told "nothing new" at least this often, and
# then checks whether the owner's lease is gone; well under a lease.
DEFAULT_BLOCK_MS = 250
# Replicas that must acknowledge a round before its tokens reach readers (``replicas``): none by default,
# as Redis itself replicates asynchronously; see docs/redis.md, "Failover".
DEFAULT_MIN_REPLICAS = 0
# Tokenwire's own query parameters in a log URL; the rest go to redis-py.
_OWN_PARAMS = {"lease_ms": DEFAULT_LEASE_MS, "ttl_ms": DEFAULT_TTL_MS, "maxlen": DEFAULT_MAXLEN,
               "block_ms": DEFAULT_BLOCK_MS, "min_replicas": DEFAULT_MIN_REPLICAS}


def _checked_url(url: str) -> SplitResult:
    """``url`` split, refused now as redis-py would refuse it only on first use (a traceback then).

    A database that is not a number is refused too: redis-py would quietly use database 0.
    """
    shown = redact_url(url)
    try:
        parts = urlsplit(url)
    except ValueError as exc:             # an unclosed [ of an IPv6 host
        raise ValueError(f"log URL {shown!r} is malformed: {scrub(str(exc), url)}") from None
    if sentinel.is_sentinel(url):
        sentinel.parse(url)               # the sentinels, the service, the primary's settings
        return parts
    if parts.scheme not in ("redis", "rediss", "unix"):
        raise ValueError(f"log URL must start with {either(REDIS_SCHEMES)}, got {shown!r}")
    try:
        redis.ConnectionPool.from_url(url)   # parses, connects to nothing
    except ValueError as exc:             # a port, a db or a redis-py setting that is not a number
        raise ValueError(f"log URL {shown!r} is malformed: {scrub(str(exc), url)}") from None
    db = parts.path.strip("/")
    if parts.scheme != "unix" and db and not (db.isascii() and db.isdigit()):
        raise ValueError(f"log URL {shown!r} names database {db!r}; a database is a number (/0)")
    return parts


def _positive(name: str, value: object) -> int:
    number = int(value) if isinstance(value, str) and value.isascii() and value.isdigit() else value
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return number


class _Runner:
    """A private event loop on a daemon thread, started on first use: where the blocking calls run."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                self._loop = asyncio.new_event_loop()
                threading.Thread(target=self._loop.run_forever, name="tokenwire-redis", daemon=True).start()
            loop = self._loop
        return asyncio.run_coroutine_threadsafe(coro, loop).result(STALL_TIMEOUT_S + 5)

    def stop(self, last: Coroutine[Any, Any, None]) -> None:
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is None:
            last.close()
            return
        asyncio.run_coroutine_threadsafe(last, loop).result(STALL_TIMEOUT_S + 5)
        loop.call_soon_threadsafe(loop.stop)


class RedisTokenLog:
    """A ``TokenLog`` on Redis Streams, with a per-stream generation lease (the blocking face of ``aio``).

    ``url`` is a ``redis://`` (or ``rediss://``, ``unix://``, ``redis+sentinel://``:
    ``sentinel``) URL; the query may set ``lease_ms``, ``ttl_ms``, ``maxlen``,
    ``block_ms`` and ``min_replicas`` (``replicas``; the rest goes to
    redis-py).  ``name`` labels this instance in owner ids (default
    host:pid).  Raises ``ValueError`` for a bad URL or setting; connecting is
    lazy, so a Redis that is down shows up as ``LogUnavailable`` on first use.
    """

    def __init__(self, url: str, *, name: str | None = None, prefix: str = "tokenwire",
                 **settings: int) -> None:
        parts = _checked_url(url)
        query = dict(parse_qsl(parts.query))
        own = {key: query.pop(key) for key in list(query) if key in _OWN_PARAMS}
        unknown = set(settings) - set(_OWN_PARAMS)
        if unknown:
            raise TypeError(f"unknown RedisTokenLog settings: {sorted(unknown)!r}")
        merged = {**_OWN_PARAMS, **own, **settings}
        self.lease_ms, self.ttl_ms, self.maxlen, self.block_ms = (
            _positive(key, merged[key]) for key in ("lease_ms", "ttl_ms", "maxlen", "block_ms"))
        self.min_replicas = replicas.count_of(merged["min_replicas"])
        self.url = urlunsplit(parts._replace(query=urlencode(query, safe="/:,")))   # paths shown as written
        self.where = redact_url(self.url)       # what any output shows: the password is ***
        self.prefix = prefix
        self.owner_id = f"{name or f'{socket.gethostname()}:{os.getpid()}'}/{secrets.token_hex(4)}"
        self.aio = AsyncRedisLog(self)      # the implementation: code on an event loop awaits it
        self._runner = _Runner()

    def describe(self) -> str:
        """One line for the server's banner."""
        said = replicas.warning(self)       # known once the log's first round has asked Redis (``check``)
        return (f"{self.where}, shared by every instance pointing there (owner {self.owner_id})"
                + (f"; warning: {said}" if said else ""))

    def check(self) -> str | None:
        """None if Redis answers now and lets the log's user run every command it needs (``acl``), else a line
        saying it does not answer (the server starts anyway); raises ``acl.NotPermitted`` naming each command
        Redis refuses the user (the server must not start: such a gap fails quietly).

        The blocking face's loop is closed again afterwards: a server talks to Redis from its own.
        """
        why = "it does not answer"
        try:
            self._run(self.aio.check_acl())
            if self.ping():            # through the writer: its first round asks Redis's eviction policy (policy)
                return None
        except LogUnavailable as exc:   # the cause, for the operator: a refused certificate, a wrong passphrase
            why = exc.detail.removeprefix(f"redis at {self.where}: ")
        finally:
            self.close()
        return (f"cannot reach redis at {self.where} now; starting anyway: the live endpoints answer 503 "
                f"with Retry-After until it is back ({why})")

    def __repr__(self) -> str:
        return f"RedisTokenLog({self.where!r}, owner={self.owner_id!r})"

    def close(self) -> None:
        """Close the blocking face's connections and its thread (they come back if it is used again)."""
        self._runner.stop(self.aio.close())

    def keys(self, stream_id: str) -> tuple[str, str, str]:
        """The stream's three keys in Redis: its meta (a hash), its tokens (a stream) and its lease."""
        base = f"{self.prefix}:{{{stream_id}}}"
        return f"{base}:meta", f"{base}:tokens", f"{base}:lease"

    def kept_key(self, kind: str, key: str) -> str:
        """The key holding what is kept of ``kind``'s ``key`` (``AsyncRedisLog.keep``): ``chat``, ``response``."""
        return f"{self.prefix}:{kind}:{{{key}}}"

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._runner.run(coro)

    def ping(self) -> bool:
        """Return True if Redis answers; never raises."""
        return self._run(self.aio.ping())

    # -- the TokenLog protocol (each as ``aio``'s, which see) -----------------------------------
    def create(self, stream_id: str, meta: Mapping[str, Any], total: int) -> None:
        """Start a stream of ``total`` tokens; raises ``ValueError`` if the id exists, ``LogUnavailable``."""
        self._run(self.aio.create(stream_id, meta, total))

    def meta(self, stream_id: str) -> Mapping[str, Any]:
        return self._run(self.aio.meta(stream_id))

    def total(self, stream_id: str) -> int:
        return self._run(self.aio.total(stream_id))

    def length(self, stream_id: str) -> int:
        """Return the number of tokens generated so far (the next index)."""
        return self._run(self.aio.length(stream_id))

    def state(self, stream_id: str) -> StreamState:
        return self._run(self.aio.state(stream_id))

    def set_state(self, stream_id: str, state: StreamState, failure: str | None = None) -> None:
        """Record ``state``; ``done`` is final, and ``done``/``cancelled`` release this instance's lease.

        ``cancelled`` is ignored while another instance holds the lease (it is
        still generating there).  ``failure``: why the model failed, stored
        with the state.  Raises ``UnknownStream``, ``LogUnavailable``.
        """
        self._run(self.aio.set_state(stream_id, state, failure))

    def failure(self, stream_id: str) -> str | None:
        """Why the stream's model failed, as ``set_state`` stored it; None if it did not."""
        return self._run(self.aio.failure(stream_id))

    def append(self, stream_id: str, index: int, token: str) -> None:
        """Log ``token`` at ``index`` if this instance holds (or can take) the lease.

        Raises ``IndexConflict`` unless ``index == length``, ``LeaseLost`` if
        another instance holds the lease, ``UnknownStream``, ``LogUnavailable``.
        """
        self._run(self.aio.append(stream_id, index, token))

    def read_after(self, stream_id: str, cursor: int, limit: int | None = None) -> list[str]:
        """Return the tokens at ``cursor+1`` on (at most ``limit``).

        Raises ``LogGap`` if index ``cursor+1`` was trimmed, ``UnknownStream``,
        ``LogUnavailable``, ``ValueError`` for a cursor below -1.
        """
        if cursor < -1:
            raise ValueError(f"cursor must be -1 or a token index, got {cursor!r}")
        return self._run(self.aio.read_after(stream_id, cursor, limit))

    # -- sharing: lease and following ------------------------------------------
    def claim(self, stream_id: str, hold_ms: int | None = None) -> Claim:
        """Take the lease if it is free, or extend it (to ``hold_ms``) if this instance holds it.

        Returns a ``Claim``; a finished stream is never claimed.  The blocking
        face renews nothing (``claim`` disowns at once): claim again.
        Raises ``UnknownStream``, ``LogUnavailable``.
        """
        claim = self._run(self.aio.claim(stream_id, hold_ms))
        self._run(self._disown(stream_id))
        return claim

    async def _disown(self, stream_id: str) -> None:
        self.aio.disown(stream_id)

    def release(self, stream_id: str) -> bool:
        """Give up the lease if this instance holds it; returns whether it did. Raises ``LogUnavailable``."""
        return self._run(self.aio.release(stream_id))

    def owner(self, stream_id: str) -> str | None:
        """Return the owner id holding the lease, or None. Raises ``LogUnavailable``."""
        return self._run(self.aio.owner(stream_id))

    def wait_after(self, stream_id: str, cursor: int, block_ms: int | None = None) -> list[tuple[int, str]]:
        """Wait up to ``block_ms`` (the log's) for tokens after ``cursor``; returns ``(index, text)`` pairs.

        An empty list means the wait timed out.  Raises ``LogUnavailable``.
        """
        return self._run(self.aio.wait_after(stream_id, cursor, block_ms))

    def delete(self, stream_id: str) -> None:
        """Forget a stream at once (its three keys). Raises ``LogUnavailable``."""
        self._run(self.aio.command("DEL", *self.keys(stream_id)))

    def entries(self, stream_id: str) -> list[tuple[int, str, str]]:
        """Return every kept token as ``(index, text, owner that generated it)``; for tests and diagnostics."""
        meta, tokens, _ = self.keys(stream_id)
        entries = self._run(self.aio.command("XRANGE", tokens, "-", "+"))
        epochs = sorted({entry_id.partition("-")[0] for entry_id, _ in entries})
        # HMGET, not HGETALL: the fields asked by name, with what the log's ACL rule allows
        named = self._run(self.aio.command("HMGET", meta, *(f"by:{epoch}" for epoch in epochs))) if epochs else []
        owners = dict(zip(epochs, named, strict=True))
        return [(entry_index(entry_id), str(_named(fields)["t"]), str(owners[entry_id.partition("-")[0]] or ""))
                for entry_id, fields in entries]

    def key_ttls_ms(self, stream_id: str) -> tuple[int, int]:
        """Return the remaining TTL of the meta and tokens keys in ms (negative: none / missing)."""
        meta, tokens, _ = self.keys(stream_id)
        return int(self._run(self.aio.command("PTTL", meta))), int(self._run(self.aio.command("PTTL", tokens)))


def _named(reply: Any) -> dict[str, Any]:
    """Field/value pairs as a dict: a flat list in RESP2, a map in RESP3."""
    return dict(reply) if isinstance(reply, dict) else dict(zip(reply[::2], reply[1::2], strict=True))
