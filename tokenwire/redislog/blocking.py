"""The token log on Redis Streams, shared by every tokenwire instance that points at the same Redis.

How this works: each stream has three keys, all with the stream id as a hash
tag (``{id}``) so that a Lua script may touch them together (one cluster slot):

- ``<prefix>:{id}:meta``, a hash: ``params`` (the JSON meta given to ``create``:
  what any instance needs to rebuild the stream), ``total``, ``length`` (the
  next index) and ``state`` (generating / done / cancelled);
- ``<prefix>:{id}:tokens``, a Redis stream: token ``i`` is the entry with id
  ``0-(i+1)`` and fields ``t`` (the text) and ``by`` (the owner that made it).
  "After cursor c" is then the exclusive start ``0-(c+1)`` for ``XRANGE``
  and ``XREAD``, and Redis itself refuses a second ``XADD`` of an index;
- ``<prefix>:{id}:lease``, a string: the owner id of the one instance allowed
  to generate, set with ``SET NX PX`` and renewed before every model step.

Every write is a Lua script, so "check the lease, check the index, XADD,
re-arm the TTLs" happens atomically: an instance whose lease expired (it
stalled, or was partitioned away) and was taken over is fenced off, its
append fails with ``LeaseLost`` instead of landing.  The append also refuses
any index other than ``length`` (``IndexConflict``), which is what makes
"never an index twice" hold even across a lease hand-over.  A retried append
that already landed (the reply was lost) is recognised and succeeds.

Memory is bounded per stream by ``MAXLEN`` (exact, so a cursor before the
first kept token is a ``LogGap``, as in memory) and in time by a TTL re-armed
on every write; the number of streams is bounded by that TTL times the
creation rate (give Redis a ``maxmemory`` for a hard cap).  Any error from
Redis (down, timing out, refusing writes) is raised as ``LogUnavailable``,
which the server answers with 503 and ``Retry-After``.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from .aio import AsyncRedisLog
from .scripts import (
    APPEND,
    CLAIM,
    CREATE,
    RELEASE,
    SET_STATE,
    Claim,
    appended,
    claimed,
    create_args,
    created,
    entry_index,
    followed,
    tokens_read,
)
from ..core.tokenlog import (
    DEFAULT_MAX_AGE_NS,
    DEFAULT_MAX_TOKENS,
    LeaseLost,
    LogUnavailable,
    StreamState,
    UnknownStream,
)

__all__ = [
    "DEFAULT_BLOCK_MS",
    "DEFAULT_LEASE_MS",
    "DEFAULT_MAXLEN",
    "DEFAULT_TTL_MS",
    "Claim",
    "LeaseLost",
    "RedisTokenLog",
]

# How long an owner's lease lasts without renewal (it is renewed before every
# model step).  A crashed instance's streams are taken over this long after its
# last token: long enough to ride out a GC pause or a slow Redis round trip,
# short enough that a reconnect (EventSource waits `retry`, 750 ms) waits
# about one more retry for the takeover.
DEFAULT_LEASE_MS = 2_000
# A stream's keys live this long after their last write, as the in-memory
# log keeps a stream: a reconnect within ten minutes finds it.
DEFAULT_TTL_MS = DEFAULT_MAX_AGE_NS // 1_000_000
# Tokens kept per stream (exact MAXLEN), the in-memory log's bound.
DEFAULT_MAXLEN = DEFAULT_MAX_TOKENS
# A follower's XREAD BLOCK: it wakes at least this often to check whether the
# owner's lease is gone (the heartbeat), well under a lease.
DEFAULT_BLOCK_MS = 250
# Socket timeout for ordinary commands: Redis answers in well under a
# millisecond on a LAN, so a second means it is down or wedged, and the
# request gets its 503 within that second instead of hanging.
OP_TIMEOUT_S = 1.0
# Tokenwire's own query parameters in a log URL; the rest go to redis-py.
_OWN_PARAMS = {"lease_ms": DEFAULT_LEASE_MS, "ttl_ms": DEFAULT_TTL_MS, "maxlen": DEFAULT_MAXLEN,
               "block_ms": DEFAULT_BLOCK_MS}


def _positive(name: str, value: object) -> int:
    number = int(value) if isinstance(value, str) and value.isascii() and value.isdigit() else value
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return number


class RedisTokenLog:
    """A ``TokenLog`` on Redis Streams, with a per-stream generation lease.

    ``url`` is a ``redis://`` (or ``rediss://``, ``unix://``) URL; the query
    may set ``lease_ms``, ``ttl_ms``, ``maxlen`` and ``block_ms`` (the rest
    goes to redis-py).  ``name`` labels this instance in owner ids (default
    host:pid).  Raises ``ValueError`` for a bad URL or setting; connecting is
    lazy, so a Redis that is down shows up as ``LogUnavailable`` on first use.
    """

    def __init__(self, url: str, *, name: str | None = None, prefix: str = "tokenwire",
                 **settings: int) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("redis", "rediss", "unix"):
            raise ValueError(f"log URL must start with redis://, rediss:// or unix://, got {url!r}")
        query = dict(parse_qsl(parts.query))
        own = {key: query.pop(key) for key in list(query) if key in _OWN_PARAMS}
        unknown = set(settings) - set(_OWN_PARAMS)
        if unknown:
            raise TypeError(f"unknown RedisTokenLog settings: {sorted(unknown)!r}")
        merged = {**_OWN_PARAMS, **own, **settings}
        self.lease_ms, self.ttl_ms, self.maxlen, self.block_ms = (
            _positive(key, merged[key]) for key in ("lease_ms", "ttl_ms", "maxlen", "block_ms"))
        self.url = urlunsplit(parts._replace(query=urlencode(query)))
        self.where = parts.netloc or parts.path
        self.prefix = prefix
        self.owner_id = f"{name or f'{socket.gethostname()}:{os.getpid()}'}/{secrets.token_hex(4)}"
        retry = Retry(NoBackoff(), 1)   # one immediate retry: a pooled connection Redis closed on restart
        # Any: redis-py types every reply as a union of bytes/str/None whatever decode_responses says.
        self._redis: Any = redis.Redis.from_url(self.url, decode_responses=True, socket_timeout=OP_TIMEOUT_S,
                                           socket_connect_timeout=OP_TIMEOUT_S, retry=retry)
        self._blocking: Any = redis.Redis.from_url(self.url, decode_responses=True,
                                              socket_timeout=OP_TIMEOUT_S + self.block_ms / 1000,
                                              socket_connect_timeout=OP_TIMEOUT_S, retry=retry)
        self._create = self._redis.register_script(CREATE)
        self._claim = self._redis.register_script(CLAIM)
        self._append = self._redis.register_script(APPEND)
        self._set_state = self._redis.register_script(SET_STATE)
        self._release = self._redis.register_script(RELEASE)
        self.aio = AsyncRedisLog(self)      # the same log for code on an event loop: nothing blocks

    def describe(self) -> str:
        """One line for the server's banner."""
        return f"redis at {self.where}, shared by every instance pointing there (owner {self.owner_id})"

    def check(self) -> str | None:
        """None if Redis answers now, else a line saying it does not (the server starts anyway)."""
        if self.ping():
            return None
        return (f"cannot reach redis at {self.where} now; starting anyway: the live endpoints answer 503 "
                f"with Retry-After until it is back")

    def __repr__(self) -> str:
        return f"RedisTokenLog({self.where!r}, owner={self.owner_id!r})"

    def close(self) -> None:
        """Close this log's connections (it reconnects if used again)."""
        self._redis.close()
        self._blocking.close()

    # -- keys and errors -----------------------------------------------------
    def _keys(self, stream_id: str) -> tuple[str, str, str]:
        base = f"{self.prefix}:{{{stream_id}}}"
        return f"{base}:meta", f"{base}:tokens", f"{base}:lease"

    @contextmanager
    def _io(self) -> Iterator[None]:
        try:
            yield
        except redis.RedisError as exc:
            raise LogUnavailable(f"redis at {self.where}: {type(exc).__name__}: {exc}") from exc

    def ping(self) -> bool:
        """Return True if Redis answers; never raises."""
        try:
            return bool(self._redis.ping())
        except redis.RedisError:
            return False

    # -- the TokenLog protocol -------------------------------------------------
    def create(self, stream_id: str, meta: Mapping[str, Any], total: int) -> None:
        """Start a stream of ``total`` tokens; raises ``ValueError`` if the id exists, ``LogUnavailable``."""
        with self._io():
            made = self._create(keys=self._keys(stream_id), args=create_args(meta, total, self.ttl_ms, self.owner_id))
        created(stream_id, made)

    def _field(self, stream_id: str, name: str) -> str:
        with self._io():
            value = self._redis.hget(self._keys(stream_id)[0], name)
        if value is None:
            raise UnknownStream(stream_id)
        return str(value)

    def meta(self, stream_id: str) -> Mapping[str, Any]:
        meta: dict[str, Any] = json.loads(self._field(stream_id, "params"))
        return meta

    def total(self, stream_id: str) -> int:
        return int(self._field(stream_id, "total"))

    def length(self, stream_id: str) -> int:
        """Return the number of tokens generated so far (the next index)."""
        return int(self._field(stream_id, "length"))

    def state(self, stream_id: str) -> StreamState:
        return StreamState(self._field(stream_id, "state"))

    def set_state(self, stream_id: str, state: StreamState) -> None:
        """Record ``state``; ``done`` is final, and ``done``/``cancelled`` release this instance's lease.

        ``cancelled`` is ignored while another instance holds the lease (it is
        still generating there).  Raises ``UnknownStream``, ``LogUnavailable``.
        """
        with self._io():
            stored = self._set_state(keys=self._keys(stream_id),
                                     args=[self.owner_id, StreamState(state).value, self.ttl_ms])
        if not stored:
            raise UnknownStream(stream_id)

    def append(self, stream_id: str, index: int, token: str) -> None:
        """Log ``token`` at ``index`` if this instance holds (or can take) the lease.

        Raises ``IndexConflict`` unless ``index == length``, ``LeaseLost`` if
        another instance holds the lease, ``UnknownStream``, ``LogUnavailable``.
        """
        with self._io():
            status, value = self._append(keys=self._keys(stream_id), args=[
                self.owner_id, index, token, self.maxlen, self.ttl_ms, self.lease_ms])
        appended(stream_id, index, status, value)

    def read_after(self, stream_id: str, cursor: int, limit: int | None = None) -> list[str]:
        """Return the tokens at ``cursor+1`` on (at most ``limit``): ``XRANGE (0-(cursor+1) +``.

        Raises ``LogGap`` if index ``cursor+1`` was trimmed, ``UnknownStream``,
        ``LogUnavailable``, ``ValueError`` for a cursor below -1.
        """
        if cursor < -1:
            raise ValueError(f"cursor must be -1 or a token index, got {cursor!r}")
        meta, tokens, _ = self._keys(stream_id)
        with self._io():
            pipe = self._redis.pipeline(transaction=True)
            pipe.hget(meta, "length").xrange(tokens, "-", "+", count=1)
            if limit != 0:
                pipe.xrange(tokens, f"(0-{cursor + 1}", "+", count=limit)
            replies = pipe.execute()
        return tokens_read(stream_id, cursor, replies)

    # -- sharing: lease and following ------------------------------------------
    def claim(self, stream_id: str, hold_ms: int | None = None) -> Claim:
        """Take the lease if it is free, or extend it (to ``hold_ms``) if this instance holds it.

        Returns a ``Claim``; a finished stream is never claimed.  Raises
        ``UnknownStream``, ``LogUnavailable``.
        """
        with self._io():
            reply = self._claim(keys=(self._keys(stream_id)[0], self._keys(stream_id)[2]),
                                args=[self.owner_id, hold_ms or self.lease_ms])
        return claimed(stream_id, reply)

    def release(self, stream_id: str) -> bool:
        """Give up the lease if this instance holds it; returns whether it did. Raises ``LogUnavailable``."""
        with self._io():
            return bool(self._release(keys=[self._keys(stream_id)[2]], args=[self.owner_id]))

    def owner(self, stream_id: str) -> str | None:
        """Return the owner id holding the lease, or None. Raises ``LogUnavailable``."""
        with self._io():
            value = self._redis.get(self._keys(stream_id)[2])
        return None if value is None else str(value)

    def wait_after(self, stream_id: str, cursor: int, block_ms: int | None = None) -> list[tuple[int, str]]:
        """Block up to ``block_ms`` (``XREAD BLOCK``) for tokens after ``cursor``; returns ``(index, text)`` pairs.

        An empty list means the wait timed out.  Raises ``LogUnavailable``.
        """
        tokens = self._keys(stream_id)[1]
        with self._io():
            reply = self._blocking.xread({tokens: f"0-{cursor + 1}"}, block=block_ms or self.block_ms)
        return followed(reply, tokens)

    def delete(self, stream_id: str) -> None:
        """Forget a stream at once (its three keys). Raises ``LogUnavailable``."""
        with self._io():
            self._redis.delete(*self._keys(stream_id))

    def entries(self, stream_id: str) -> list[tuple[int, str, str]]:
        """Return every kept token as ``(index, text, owner that generated it)``; for tests and diagnostics."""
        with self._io():
            entries = self._redis.xrange(self._keys(stream_id)[1])
        return [(entry_index(entry_id), fields["t"], fields["by"]) for entry_id, fields in entries]

    def key_ttls_ms(self, stream_id: str) -> tuple[int, int]:
        """Return the remaining TTL of the meta and tokens keys in ms (negative: none / missing)."""
        meta, tokens, _ = self._keys(stream_id)
        with self._io():
            return int(self._redis.pttl(meta)), int(self._redis.pttl(tokens))
