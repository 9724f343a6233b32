"""Followers share one read: one task per event loop blocks on one ``XREAD`` over every stream followed here.

How this works: a follower asks ``wait(key, cursor)`` for the tokens after
``cursor`` and gets a future.  The reader keeps one ``_Follow`` per stream
key (the position its next ``XREAD`` reads from, what it read that no
follower has taken yet, and the followers waiting), and one task issues
``XREAD BLOCK`` over all of them on the reader's one connection.  What comes
back is handed to each waiting follower from its own cursor on (a follower
whose cursor is behind what was read has the position moved back, so the
next read fetches it again: nobody sees a gap).  A follower not served
within ``block_ms`` gets an empty list: its heartbeat, after which it checks
the owner's lease, as a blocking read of its own did.  A key joining while
the read is blocked interrupts it (``CLIENT UNBLOCK``, sent through the
writer) so that the new key is read at once.  A key nobody waited on for a
while is dropped, and the task ends when no key is left.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from redis.exceptions import MovedError

from ..core.tokenlog import LogError
from . import replicas
from .clients import STALL_TIMEOUT_S, Settings, client, unavailable
from .replies import entry_index
from .topology import REDIRECTS
from .writer import LogWriter

__all__ = ["FOLLOW_COUNT", "FOLLOW_LINGER_S", "FOLLOW_POLL_S", "LogReader"]

# Entries one XREAD returns per key: a follower far behind catches up in
# steps of this many (the rest comes with the next read, at once).
FOLLOW_COUNT = 512
# Entries kept for a key no follower is waiting on; past it the key is dropped
# (its follower, if it comes back, reads from its own cursor again).
_BUFFER_MAX = 4 * FOLLOW_COUNT
# A key is dropped this many heartbeats after its last follower stopped waiting.
_IDLE_BEATS = 4
# After a read that brought entries, the next waits this long: with many streams followed, entries land
# on some key every fraction of a millisecond, and an XREAD over all of them per entry would cost Redis
# ~40 us each; 2 ms gathers what every followed stream made meanwhile (a follower's token comes at most
# this much later; at 20 ms a token, one in ten of a pace).
FOLLOW_LINGER_S = 0.002
# A cluster node whose followed keys span several slots cannot block on them in one XREAD: it reads them
# again this long after a read that brought nothing.  A follower's token comes at most this much later (half
# of a 20 ms pace); each followed slot there costs its node this many XREADs a second while nothing comes
# (100; a slot with entries is read every FOLLOW_LINGER_S, as one blocking read over every key is).
FOLLOW_POLL_S = 0.01

Entries = list[tuple[int, str]]


class _Follow:
    __slots__ = ("after", "buffer", "idle_since", "pos", "waiters")

    def __init__(self, pos: int) -> None:
        self.pos = pos
        self.after: str | None = None         # the entry id of index ``pos`` (None: to be looked up)
        self.buffer: Entries = []
        self.waiters: list[tuple[int, asyncio.Future[Entries], float]] = []
        self.idle_since = 0.0

    def take(self, cursor: int) -> Entries:
        """What was read right after ``cursor``, or nothing (then the next read starts after ``cursor``)."""
        got = [entry for entry in self.buffer if entry[0] > cursor]
        if got and got[0][0] == cursor + 1:
            self.buffer = []
            return got
        if cursor != self.pos:
            self.pos, self.after, self.buffer = cursor, None, []
        return []


class _Node:
    """One node's part of the shared read: its connection, the read's task, whether it blocks now."""

    __slots__ = ("blocked", "client_id", "redis", "task", "unblocking")

    def __init__(self, redis: Any) -> None:
        self.redis = redis
        self.task: asyncio.Task[None] | None = None
        self.client_id: int | None = None
        self.blocked = False
        self.unblocking = False


class LogReader:
    """One event loop's shared blocking read; ``wait`` stands in for a follower's own ``XREAD BLOCK``."""

    def __init__(self, settings: Settings, loop: asyncio.AbstractEventLoop, writer: LogWriter) -> None:
        self.settings, self.loop, self.writer = settings, loop, writer
        self.follows: dict[str, _Follow] = {}
        self.nodes: dict[str, _Node] = {}     # the nodes read from, by ``host:port``
        self.reads = 0                        # XREAD calls made (for tests and the bench)

    def wait(self, key: str, cursor: int) -> asyncio.Future[Entries]:
        """The entries after ``cursor`` of stream ``key`` as soon as there are some, or [] after ``block_ms``."""
        future: asyncio.Future[Entries] = self.loop.create_future()
        follow = self.follows.get(key)
        node = self.writer.topology.node_of(key)
        if follow is None:
            follow = self.follows[key] = _Follow(cursor)
            self._interrupt(node)
        ready = follow.take(cursor)
        if ready:
            future.set_result(ready)
            return future
        follow.waiters.append((cursor, future, self.loop.time() + self.settings.block_ms / 1000))
        self._start(node)
        return future

    def _start(self, node: str) -> None:
        """Make sure ``node``'s read runs."""
        here = self.nodes.get(node)
        if here is None:
            timeout_s = STALL_TIMEOUT_S + self.settings.block_ms / 1000
            home = node == self.writer.topology.home and not self.writer.topology.cluster
            here = self.nodes[node] = _Node(client(self.settings, timeout_s, None if home else node))
        if here.task is None:
            here.task = self.loop.create_task(self._run(node, here))

    def _interrupt(self, node: str) -> None:
        """A new key while ``node``'s read blocks: end the block now, so the next read includes it."""
        here = self.nodes.get(node)
        if here is not None and here.blocked and not here.unblocking and here.client_id is not None:
            here.unblocking = True
            done = self.writer.command("CLIENT", "UNBLOCK", here.client_id, node=node)
            done.add_done_callback(lambda f: f.cancelled() or f.exception())     # best effort

    def _mine(self, node: str) -> dict[str, _Follow]:
        """The follows read on ``node`` now; the others' nodes are made sure to read theirs."""
        topology, mine = self.writer.topology, {}
        for key, follow in self.follows.items():
            at = topology.node_of(key)
            if at == node:
                mine[key] = follow
            elif self.nodes.get(at) is None or self.nodes[at].task is None:
                self._start(at)
        return mine

    async def _run(self, node: str, here: _Node) -> None:
        try:
            await self.writer.ready()       # which node each key is read on: the writer asks Redis once
            while mine := self._mine(node):
                if here.client_id is None:
                    here.client_id = int(await here.redis.client_id())
                await self._look_up(mine)
                if any(follow.after is None for follow in self._mine(node).values()):
                    continue                # one joined or moved while the ids were looked up: look again
                groups = self.writer.topology.by_slot(mine, lambda key: key)
                got = await (self._block(here, mine) if len(groups) == 1 else self._poll(here, mine, groups))
                self._expire()
                await asyncio.sleep(FOLLOW_LINGER_S if got else 0 if len(groups) == 1 else FOLLOW_POLL_S)
        except Exception as exc:            # Redis down or stalled past the timeout: every follower is told
            here.client_id = None
            self._fail(self._mine(node), unavailable(self.settings, exc))
        finally:
            here.task = None

    async def _block(self, here: _Node, mine: dict[str, _Follow]) -> bool:
        """One ``XREAD BLOCK`` over ``mine`` (keys of one slot); True if it brought entries."""
        streams = {key: str(follow.after) for key, follow in mine.items()}
        here.blocked, here.unblocking = True, False
        try:
            reply = await here.redis.xread(streams, count=FOLLOW_COUNT, block=self.settings.block_ms)
        except REDIRECTS as exc:
            await self._redirected([exc])
            return False
        finally:
            here.blocked = False
        self.reads += 1
        if reply:
            await replicas.barrier(self.writer)     # min_replicas: handed out once the replicas have it
        self._hand_out(streams, reply)
        return bool(reply)

    async def _poll(self, here: _Node, mine: dict[str, _Follow], groups: list[list[str]]) -> bool:
        """One ``XREAD`` per slot of ``mine``, none blocking, in one round trip; True if any brought entries."""
        pipe = here.redis.pipeline(transaction=False)
        asked = []
        for group in groups:
            streams = {key: str(mine[key].after) for key in group}
            pipe.xread(streams, count=FOLLOW_COUNT)
            asked.append(streams)
        replies = await pipe.execute(raise_on_error=False)
        self.reads += len(replies)
        got = False
        redirected = [reply for reply in replies if isinstance(reply, REDIRECTS)]
        if any(reply and not isinstance(reply, Exception) for reply in replies):
            await replicas.barrier(self.writer)
        for streams, reply in zip(asked, replies, strict=True):
            if isinstance(reply, Exception) and not isinstance(reply, REDIRECTS):
                raise reply
            if not isinstance(reply, Exception):
                self._hand_out(streams, reply)
                got = got or bool(reply)
        await self._redirected(redirected)
        return got

    async def _redirected(self, replies: Sequence[Exception]) -> None:
        """Slots moved (MOVED: their keys are read on the new node from now on), or are moving (ASK, TRYAGAIN:
        read again a poll later, by when they have moved)."""
        for reply in replies:
            if isinstance(reply, MovedError):
                self.writer.topology.moved(reply)
        if any(not isinstance(reply, MovedError) for reply in replies):
            await asyncio.sleep(FOLLOW_POLL_S)

    async def _look_up(self, mine: dict[str, _Follow]) -> None:
        """The entry ids the read starts after, for the positions not known by id (one script call per slot).

        An entry's id holds the epoch of the owner that wrote it, which only the stream's meta knows for an
        index this reader has not read."""
        wanted = [(key, follow.pos) for key, follow in mine.items() if follow.after is None]
        if not wanted:
            return
        groups = self.writer.topology.by_slot(wanted, lambda item: item[0])
        found = await asyncio.gather(*(self.writer.script("ids_at", [key[:-len("tokens")] + "meta" for key, _ in group],
                                                          [pos for _, pos in group]) for group in groups))
        for group, ids in zip(groups, found, strict=True):
            for (key, pos), entry_id in zip(group, ids, strict=True):
                follow = self.follows.get(key)
                if follow is not None and follow.pos == pos:
                    follow.after = str(entry_id)

    def _hand_out(self, asked: dict[str, str], reply: Any) -> None:
        items = reply.items() if isinstance(reply, dict) else (reply or [])
        for key, raw in items:
            follow = self.follows.get(key)
            if follow is None or not raw or asked.get(key) != follow.after:
                continue                    # dropped, or moved while the read was out: read again
            follow.buffer.extend((entry_index(entry_id), fields["t"]) for entry_id, fields in raw)
            follow.pos, follow.after = follow.buffer[-1][0], str(raw[-1][0])
            waiters, follow.waiters = follow.waiters, []
            served = False
            for cursor, future, deadline in waiters:
                if future.done():
                    continue
                got = [entry for entry in follow.buffer if entry[0] > cursor]
                if got and got[0][0] == cursor + 1:
                    future.set_result(got)
                    served = True
                else:
                    follow.waiters.append((cursor, future, deadline))
            if served:
                follow.buffer = []
            behind = [cursor for cursor, _, _ in follow.waiters if cursor < follow.pos]
            if behind:                      # a follower behind what was read: read again from its cursor
                follow.pos, follow.after, follow.buffer = min(behind), None, []
            if len(follow.buffer) > _BUFFER_MAX:
                del self.follows[key]

    def _expire(self) -> None:
        now = self.loop.time()
        slack = self.settings.block_ms / 2000
        for key, follow in list(self.follows.items()):
            waiting = []
            for cursor, future, deadline in follow.waiters:
                if future.done():
                    continue
                if deadline - slack <= now:
                    future.set_result([])           # the heartbeat: nothing new within block_ms
                else:
                    waiting.append((cursor, future, deadline))
            follow.waiters = waiting
            if waiting:
                follow.idle_since = 0.0
            elif not follow.idle_since:
                follow.idle_since = now
            elif now - follow.idle_since > _IDLE_BEATS * self.settings.block_ms / 1000:
                del self.follows[key]

    def _fail(self, follows: dict[str, _Follow], error: LogError) -> None:
        """Tell every follower of ``follows`` (one node's) that the read failed, and drop them."""
        for key, follow in follows.items():
            self.follows.pop(key, None)
            for _, future, _ in follow.waiters:
                if not future.done():
                    future.set_exception(error)

    async def close(self) -> None:
        nodes, self.nodes = list(self.nodes.values()), {}
        for here in nodes:
            if here.task is not None:
                here.task.cancel()
            await here.redis.aclose()
