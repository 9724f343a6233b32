"""The Redis token log for the event loop: the same keys, scripts and answers as ``RedisTokenLog``, on redis.asyncio.

How this works: ``AsyncRedisLog`` is the asyncio twin of one ``RedisTokenLog``
(it shares its URL, settings and owner id, so both speak as one instance)
and nothing in it blocks the loop: every call is a coroutine that a process
awaits (the ``Await`` effect) or a route awaits.  A follower's ``XREAD BLOCK``
holds only its own connection of the pool.  Clients are made per event loop,
on first use there: a redis.asyncio connection belongs to the loop that
opened it.  Every Redis error, a timeout included, is ``LogUnavailable``
(answered 503 with ``Retry-After``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any, Protocol

import redis
import redis.asyncio
from redis.backoff import NoBackoff
from redis.retry import Retry

from ..core.tokenlog import LogUnavailable, StreamState, UnknownStream
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
    followed,
    tokens_read,
)



class LogSettings(Protocol):
    """What the twin reads of its ``RedisTokenLog``: where Redis is, the settings, who this instance is."""

    url: str
    where: str
    owner_id: str
    lease_ms: int
    ttl_ms: int
    maxlen: int
    block_ms: int

    def _keys(self, stream_id: str) -> tuple[str, str, str]: ...

__all__ = ["AsyncRedisLog"]

# The timeout of ordinary commands, as the blocking log's (OP_TIMEOUT_S).
_OP_TIMEOUT_S = 1.0


class _Clients:
    """One loop's connections: ordinary commands, blocking reads, and the registered scripts."""

    def __init__(self, url: str, block_ms: int) -> None:
        retry = Retry(NoBackoff(), 1)          # as the blocking log: one immediate retry
        self.redis: Any = redis.asyncio.Redis.from_url(url, decode_responses=True, socket_timeout=_OP_TIMEOUT_S,
                                                       socket_connect_timeout=_OP_TIMEOUT_S, retry=retry)
        self.blocking: Any = redis.asyncio.Redis.from_url(url, decode_responses=True,
                                                          socket_timeout=_OP_TIMEOUT_S + block_ms / 1000,
                                                          socket_connect_timeout=_OP_TIMEOUT_S, retry=retry)
        self.scripts = {name: self.redis.register_script(text) for name, text in
                        (("create", CREATE), ("claim", CLAIM), ("append", APPEND), ("set_state", SET_STATE),
                         ("release", RELEASE))}


class AsyncRedisLog:
    """The coroutine face of ``log`` (a ``RedisTokenLog``); each method raises what the blocking one does."""

    def __init__(self, log: LogSettings) -> None:
        self.log = log
        self._clients: dict[int, tuple[asyncio.AbstractEventLoop, _Clients]] = {}

    def _here(self) -> _Clients:
        loop = asyncio.get_running_loop()
        known = self._clients.get(id(loop))
        if known is None or known[0] is not loop:
            for key, (old, _) in list(self._clients.items()):
                if old.is_closed():
                    del self._clients[key]          # its connections went with it
            known = (loop, _Clients(self.log.url, self.log.block_ms))
            self._clients[id(loop)] = known
        return known[1]

    async def _run(self, coro: Any) -> Any:
        try:
            return await coro
        except redis.RedisError as exc:
            raise LogUnavailable(f"redis at {self.log.where}: {type(exc).__name__}: {exc}") from exc

    async def _script(self, name: str, keys: Any, args: list[Any]) -> Any:
        return await self._run(self._here().scripts[name](keys=keys, args=args))

    # -- the TokenLog protocol, as coroutines -------------------------------------------
    async def create(self, stream_id: str, meta: Mapping[str, Any], total: int) -> None:
        made = await self._script("create", self.log._keys(stream_id),
                                  create_args(meta, total, self.log.ttl_ms, self.log.owner_id))
        created(stream_id, made)

    async def _field(self, stream_id: str, name: str) -> str:
        value = await self._run(self._here().redis.hget(self.log._keys(stream_id)[0], name))
        if value is None:
            raise UnknownStream(stream_id)
        return str(value)

    async def meta(self, stream_id: str) -> Mapping[str, Any]:
        meta: dict[str, Any] = json.loads(await self._field(stream_id, "params"))
        return meta

    async def total(self, stream_id: str) -> int:
        return int(await self._field(stream_id, "total"))

    async def length(self, stream_id: str) -> int:
        return int(await self._field(stream_id, "length"))

    async def state(self, stream_id: str) -> StreamState:
        return StreamState(await self._field(stream_id, "state"))

    async def owner(self, stream_id: str) -> str | None:
        """The owner id holding the stream's lease, or None (nobody: free, or its holder died)."""
        value = await self._run(self._here().redis.get(self.log._keys(stream_id)[2]))
        return None if value is None else str(value)

    async def set_state(self, stream_id: str, state: StreamState) -> None:
        stored = await self._script("set_state", self.log._keys(stream_id),
                                    [self.log.owner_id, StreamState(state).value, self.log.ttl_ms])
        if not stored:
            raise UnknownStream(stream_id)

    async def append(self, stream_id: str, index: int, token: str) -> None:
        status, value = await self._script("append", self.log._keys(stream_id), [
            self.log.owner_id, index, token, self.log.maxlen, self.log.ttl_ms, self.log.lease_ms])
        appended(stream_id, index, status, value)

    async def read_after(self, stream_id: str, cursor: int, limit: int | None = None) -> list[str]:
        if cursor < -1:
            raise ValueError(f"cursor must be -1 or a token index, got {cursor!r}")
        meta, tokens, _ = self.log._keys(stream_id)
        pipe = self._here().redis.pipeline(transaction=True)
        pipe.hget(meta, "length").xrange(tokens, "-", "+", count=1)
        if limit != 0:
            pipe.xrange(tokens, f"(0-{cursor + 1}", "+", count=limit)
        return tokens_read(stream_id, cursor, await self._run(pipe.execute()))

    # -- sharing: lease and following ------------------------------------------------------
    async def claim(self, stream_id: str, hold_ms: int | None = None) -> Claim:
        meta, _, lease = self.log._keys(stream_id)
        reply = await self._script("claim", (meta, lease), [self.log.owner_id, hold_ms or self.log.lease_ms])
        return claimed(stream_id, reply)

    async def release(self, stream_id: str) -> bool:
        return bool(await self._script("release", [self.log._keys(stream_id)[2]], [self.log.owner_id]))

    async def wait_after(self, stream_id: str, cursor: int, block_ms: int | None = None) -> list[tuple[int, str]]:
        tokens = self.log._keys(stream_id)[1]
        reply = await self._run(self._here().blocking.xread({tokens: f"0-{cursor + 1}"},
                                                            block=block_ms or self.log.block_ms))
        return followed(reply, tokens)
