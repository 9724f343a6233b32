"""The Redis token log, on redis.asyncio: the one implementation (``RedisTokenLog`` is its blocking face).

How this works: each event loop that uses the log gets one ``LogWriter``
(every command, appends batched into one round trip per round: the group
commit; its ``renewal`` renews the owner's leases on a timer) and one ``LogReader`` (one
``XREAD BLOCK`` over every stream followed on that loop): two connections
to Redis per loop, whatever the number of streams.  A redis.asyncio
connection belongs to the loop that opened it, hence one pair per loop; a
closed loop's pair is dropped.

Every method is a coroutine (``append_future`` returns a bare future, the
cheap thing for a process's ``Await`` on the per-token path).  Calls made
for a request (``patient=False``, the default of the reads) give up after
``OP_TIMEOUT_S`` with ``LogUnavailable`` (answered 503 with Retry-After);
the producers' calls are patient (a stall shorter than the writer's socket
timeout pauses a stream rather than ending it).  Every Redis error is
``LogUnavailable``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from redis.exceptions import NoPermissionError

from ..core.buckets import Buckets
from ..core.tokenlog import LogUnavailable, StreamLost, StreamState, UnknownStream
from . import acl, policy, replicas, sentinel
from .clients import OP_TIMEOUT_S, Settings, client, unavailable
from .presence import readers_key
from .reader import LogReader
from .replies import Claim, claimed, create_args, created, tokens_read
from .rounds import LOG_ROUND_BUCKETS
from .writer import LogWriter

__all__ = ["AsyncRedisLog", "Settings"]

T = TypeVar("T")

logger = logging.getLogger("tokenwire")


class _Engine:
    def __init__(self, settings: Settings, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.writer = LogWriter(settings, loop)
        self.reader = LogReader(settings, loop, self.writer)


class AsyncRedisLog:
    """The token log on Redis for code on an event loop; see the module.  ``log`` gives the settings and keys."""

    def __init__(self, log: Settings) -> None:
        self.log = log
        self._engines: dict[int, _Engine] = {}
        self.takeovers = 0      # leases won on a stream with tokens logged, not held here (``/metrics``)
        self._gone = (0, Buckets(LOG_ROUND_BUCKETS))     # what the writers of closed loops had counted
        self.permitted = False      # Redis said the log's user may run every command it needs (``check_acl``)

    def _here(self) -> _Engine:
        loop = asyncio.get_running_loop()
        engine = self._engines.get(id(loop))
        if engine is None or engine.loop is not loop:
            for key, old in list(self._engines.items()):
                if old.loop.is_closed():
                    del self._engines[key]          # its connections went with it
                    self._gone = self._tally([old.writer])
            engine = self._engines[id(loop)] = _Engine(self.log, loop)
            policy.ask(engine.writer, self.log.where)      # Redis's eviction policy, said once (policy)
            replicas.ask(engine.writer, self.log)          # replicas with min_replicas 0, said once (replicas)
        return engine

    @property
    def writer(self) -> LogWriter:
        """This loop's writer (for tests and the bench: ``rounds``, ``owned``)."""
        return self._here().writer

    @property
    def reader(self) -> LogReader:
        return self._here().reader

    async def _ask(self, future: Awaitable[T], patient: bool) -> T:
        if patient:
            return await future
        try:
            return await asyncio.wait_for(future, OP_TIMEOUT_S)
        except TimeoutError:
            raise LogUnavailable(f"redis at {self.log.where}: no answer within {OP_TIMEOUT_S:g} s") from None

    def _command(self, *args: Any, parse: Any = None) -> asyncio.Future[Any]:
        return self._here().writer.command(*args, parse=parse)

    # -- the TokenLog protocol, as coroutines -------------------------------------------
    async def create(self, stream_id: str, meta: Mapping[str, Any], total: int) -> None:
        """Make the stream; raises ``ValueError`` if the id exists, ``LogUnavailable``."""
        args = create_args(meta, total, self.log.ttl_ms, self.log.owner_id)
        made = await self._ask(self._here().writer.script("create", self.log.keys(stream_id), args), False)
        created(stream_id, made)

    async def info(self, stream_id: str, *, patient: bool = False) -> tuple[Mapping[str, Any], int, int, StreamState]:
        """The stream's meta, total, length and state in one call; raises ``UnknownStream``, ``StreamLost``,
        ``LogUnavailable``."""
        def parse(reply: list[Any] | None) -> tuple[Mapping[str, Any], int, int, StreamState]:
            if reply is None:
                raise UnknownStream(stream_id)
            if int(reply[2]) < 0:
                raise StreamLost(stream_id)
            return json.loads(reply[0]), int(reply[1]), int(reply[2]), StreamState(reply[3])
        meta, tokens, _ = self.log.keys(stream_id)
        return await self._ask(self._here().writer.script("info", (meta, tokens), [], parse=parse), patient)

    async def _field(self, stream_id: str, name: str, patient: bool) -> str:
        def parse(reply: Any) -> str:
            if reply is None:
                raise UnknownStream(stream_id)
            return str(reply)
        return await self._ask(self._command("HGET", self.log.keys(stream_id)[0], name, parse=parse), patient)

    async def failure(self, stream_id: str, *, patient: bool = False) -> str | None:
        """The message ``set_state`` recorded with the state, None if the stream did not fail."""
        return (await self.ending(stream_id, patient=patient))[1]

    async def ending(self, stream_id: str, *, patient: bool = False) -> tuple[StreamState, str | None]:
        """The stream's state and the failure ``set_state`` stored with it (None: none), read together."""
        def parse(reply: list[Any]) -> tuple[StreamState, str | None]:
            if reply[0] is None:
                raise UnknownStream(stream_id)
            return StreamState(reply[0]), None if reply[1] is None else str(reply[1])
        meta = self.log.keys(stream_id)[0]
        return await self._ask(self._command("HMGET", meta, "state", "failure", parse=parse), patient)

    async def meta(self, stream_id: str, *, patient: bool = False) -> Mapping[str, Any]:
        meta: dict[str, Any] = json.loads(await self._field(stream_id, "params", patient))
        return meta

    async def total(self, stream_id: str, *, patient: bool = False) -> int:
        return int(await self._field(stream_id, "total", patient))

    async def length(self, stream_id: str, *, patient: bool = False) -> int:
        """The tokens logged so far (the next index): the last entry's id."""
        return (await self.info(stream_id, patient=patient))[2]

    async def state(self, stream_id: str, *, patient: bool = False) -> StreamState:
        return StreamState(await self._field(stream_id, "state", patient))

    async def owner(self, stream_id: str, *, patient: bool = False) -> str | None:
        """The owner id holding the stream's lease, or None (nobody: free, or its holder died)."""
        value = await self._ask(self._command("GET", self.log.keys(stream_id)[2]), patient)
        return None if value is None else str(value)

    async def set_state(self, stream_id: str, state: StreamState, failure: str | None = None) -> None:
        """Record ``state`` (``done`` is final; ``done``/``cancelled`` release this instance's lease), in one call.

        ``failure``: why the model failed (the ``failed`` event's message: the
        error's type, no secret), stored with the state, so that a reader on
        any process ends ``failed`` as the owner's do.
        """
        writer = self._here().writer
        if state is not StreamState.GENERATING:
            writer.renewal.disown(stream_id)
        stored = await writer.script("set_state", self.log.keys(stream_id),
                                     [self.log.owner_id, StreamState(state).value, self.log.ttl_ms, failure or ""])
        if not stored:
            raise UnknownStream(stream_id)

    def append_future(self, stream_id: str, index: int, token: str) -> asyncio.Future[None]:
        """Queue ``token`` at ``index`` for the next round; the future is done once Redis has logged it.

        It raises ``LeaseLost``, ``IndexConflict``, ``UnknownStream`` or ``LogUnavailable`` for this stream
        alone.
        """
        return self._here().writer.append(stream_id, index, token)

    async def append(self, stream_id: str, index: int, token: str) -> None:
        await self.append_future(stream_id, index, token)

    async def snapshot(self, stream_id: str, cursor: int, *, patient: bool = False) -> tuple[int, list[str]]:
        """The log's length and every token after ``cursor``, read at one instant (one script call).

        Raises ``LogGap`` if index ``cursor+1`` was trimmed, ``UnknownStream``, ``LogUnavailable``.
        """
        reply = await self._read(stream_id, cursor, None, patient)
        tokens = tokens_read(stream_id, cursor, reply)          # UnknownStream first, if it is gone
        return int(reply[0]), tokens

    async def read_after(self, stream_id: str, cursor: int, limit: int | None = None, *,
                         patient: bool = False) -> list[str]:
        """The tokens after ``cursor`` (at most ``limit``); raises ``LogGap``, ``UnknownStream``, ``LogUnavailable``."""
        return tokens_read(stream_id, cursor, await self._read(stream_id, cursor, limit, patient))

    async def _read(self, stream_id: str, cursor: int, limit: int | None, patient: bool) -> list[Any]:
        if cursor < -1:
            raise ValueError(f"cursor must be -1 or a token index, got {cursor!r}")
        meta, tokens, _ = self.log.keys(stream_id)
        future = self._here().writer.script("read", (meta, tokens), [cursor, -1 if limit is None else limit])
        reply: list[Any] = await self._ask(future, patient)
        return reply

    # -- sharing: lease and following ------------------------------------------------------
    async def claim(self, stream_id: str, hold_ms: int | None = None) -> Claim:
        """Take the lease if free, or extend it if held here; an owned stream's lease is renewed on the timer."""
        return await self._lease("claim", stream_id, hold_ms)

    async def take_over(self, stream_id: str, hold_ms: int | None = None) -> Claim:
        """Take the lease of a stream still generating whose owner is gone (none holds it); else not owned.

        Unlike ``claim``, a stopped or finished stream is never marked generating again.  Raises
        ``UnknownStream``, ``LogUnavailable``.
        """
        return await self._lease("take_over", stream_id, hold_ms)

    async def _lease(self, script: str, stream_id: str, hold_ms: int | None) -> Claim:
        """Run the lease ``script`` (claim, take_over); a lease taken is renewed on the writer's timer."""
        writer = self._here().writer
        held = stream_id in writer.renewal.owned
        claim: Claim = await writer.script(script, self.log.keys(stream_id),
                                           [self.log.owner_id, hold_ms or self.log.lease_ms],
                                           parse=lambda reply: claimed(stream_id, reply))
        if claim.owned:
            writer.renewal.own(stream_id, claim.epoch)
            if claim.length and not held:
                self.takeovers += 1         # generation goes on here from where another producer left it
        return claim

    def figures(self) -> tuple[int, Buckets]:
        """What this process's writers counted: tokens Redis took, and each round's time (``/metrics``)."""
        return self._tally([engine.writer for engine in self._engines.values()])

    def _tally(self, writers: list[LogWriter]) -> tuple[int, Buckets]:
        appended, rounds = self._gone
        return (appended + sum(w.figures.appended for w in writers),
                Buckets.merged([rounds, *(w.figures.times for w in writers)], LOG_ROUND_BUCKETS))

    async def release(self, stream_id: str) -> bool:
        writer = self._here().writer
        writer.renewal.disown(stream_id)
        return bool(await writer.script("release", [self.log.keys(stream_id)[2]], [self.log.owner_id]))

    async def stop(self, stream_id: str) -> StreamState:
        """Stop ``stream_id`` for good, whoever generates it (``STOP``); returns its state now (``done`` stays).

        Raises ``UnknownStream``, ``LogUnavailable``.
        """
        state = await self._here().writer.script("stop", self.log.keys(stream_id), [])
        if not state:
            raise UnknownStream(stream_id)
        return StreamState(state)

    async def lose_past(self, stream_id: str, cursor: int) -> bool:
        """Mark ``stream_id`` lost if it is generating and the log ends before ``cursor``'s token (``LOSE``): a
        reader was sent tokens the log no longer holds.  True if the stream is lost now.  Raises
        ``UnknownStream``, ``LogUnavailable``."""
        marked = int(await self._ask(self._here().writer.script("lose", self.log.keys(stream_id), [cursor]), False))
        if marked < 0:
            raise UnknownStream(stream_id)
        return marked == 1

    def watch_stop(self, stream_id: str, stopped: Callable[[], None]) -> None:
        """Call ``stopped`` when the lease renewal finds the stream this instance generates stopped."""
        self._here().writer.renewal.watch_stop(stream_id, stopped)

    def disown(self, stream_id: str) -> None:
        """Stop renewing ``stream_id``'s lease here (fenced off, or its producer ended); needs no running loop."""
        for engine in list(self._engines.values()):
            engine.writer.renewal.disown(stream_id)

    # -- readers' presence (``presence``) ------------------------------------------------------
    def attend(self, stream_id: str) -> asyncio.Future[Any]:
        """Say a reader of ``stream_id`` is attached here (renewed on the timer until ``leave``)."""
        writer = self._here().writer
        writer.renewal.attend(stream_id)
        return writer.script("join", self._presence_keys(stream_id), [self.log.owner_id, self.log.lease_ms,
                                                                      self.log.ttl_ms])

    def leave(self, stream_id: str) -> asyncio.Future[bool]:
        """Say no reader of ``stream_id`` is attached here any more; the future: the stream is deserted now."""
        writer = self._here().writer
        writer.renewal.unattend(stream_id)
        return writer.script("leave", self._presence_keys(stream_id), [self.log.owner_id], parse=bool)

    def deserted(self, stream_id: str) -> asyncio.Future[bool]:
        """The future of: someone read ``stream_id`` and no process has a reader of it attached now."""
        return self._here().writer.script("deserted", self._presence_keys(stream_id), [], parse=bool)

    def _presence_keys(self, stream_id: str) -> tuple[str, str]:
        meta = self.log.keys(stream_id)[0]
        return meta, readers_key(meta)

    async def wait_after(self, stream_id: str, cursor: int, block_ms: int | None = None) -> list[tuple[int, str]]:
        """The tokens after ``cursor`` as soon as there are some, or [] after the log's ``block_ms``.

        Served by this loop's one shared ``XREAD BLOCK`` (``block_ms`` other than the log's is ignored).
        """
        return await self._here().reader.wait(self.log.keys(stream_id)[1], cursor)

    async def kept(self, kind: str, key: str) -> str | None:
        """The value ``keep`` last gave ``kind``'s ``key`` (a chat's stream, a response's record), None if none."""
        value = await self._ask(self._command("GET", self.log.kept_key(kind, key)), False)
        return None if value is None else str(value)

    async def keep(self, kind: str, key: str, value: str) -> None:
        """Keep ``value`` under ``kind``'s ``key``, for as long as a stream is kept; raises ``LogUnavailable``."""
        await self._ask(self._command("SET", self.log.kept_key(kind, key), value, "PX", self.log.ttl_ms), False)

    async def check_acl(self) -> None:
        """Return once Redis lets this log's user run every command the log needs (``acl``), on a connection
        of its own; raises ``acl.NotPermitted`` naming each it refuses, ``LogUnavailable`` if Redis does not
        answer."""
        redis = client(self.log, OP_TIMEOUT_S)
        user = acl.user_of(self.log.url)
        try:
            missing = await acl.refused(redis, self.log.url, self.log.prefix)
        except NoPermissionError as exc:      # refused as it connected (a SELECT of another database)
            raise acl.NotPermitted(f"redis at {self.log.where}: user {user!r} may not connect: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - whatever redis-py raised: Redis does not answer as it should
            raise unavailable(self.log, exc) from None
        finally:
            await redis.aclose()
        if missing:
            raise acl.NotPermitted(acl.refusal(self.log.where, user, missing))
        self.permitted = True

    async def say_acl(self) -> None:
        """``check_acl`` at a server's first use of the log with no start-up check (an app mounted with no
        lifespan): what it refuses is said on the log, once (the server runs already); never raises."""
        if self.permitted:
            return
        try:
            await self.check_acl()
        except acl.NotPermitted as exc:
            self.permitted = True             # said once; every call Redis refuses answers 503 meanwhile
            logger.error("%s", exc)
        except LogUnavailable:
            pass                              # Redis is away: the next start asks again

    async def ping(self) -> bool:
        """True if Redis answers within the op timeout; never raises."""
        try:
            return bool(await self._ask(self._command("PING"), False))
        except LogUnavailable:
            return False

    async def command(self, *args: Any) -> Any:
        """Any command, through this loop's writer (diagnostics and tests); raises ``LogUnavailable``."""
        return await self._ask(self._command(*args), False)

    async def close(self) -> None:
        """Close this loop's connections (they are made again if the log is used again)."""
        engine = self._engines.pop(id(asyncio.get_running_loop()), None)
        if engine is not None:
            await engine.writer.close()
            await engine.reader.close()
        if sentinel.is_sentinel(self.log.url):
            await sentinel.close_sentinels()
