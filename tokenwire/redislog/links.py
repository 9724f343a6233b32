"""The log writer's connection to one Redis node: a round's bytes out in one write, its replies read in order.

How this works: the writer holds one ``Link`` per node it sends to (one
for a lone Redis; one per primary of a cluster, ``topology``), each with
one connection taken once from its client's pool, and the ``Replies`` that
parse what comes back on it (``resp``).  ``exchange`` sends a payload and
reads its replies within ``STALL_TIMEOUT_S``; the XADDs of a round's owned
appends are compared as bytes first (``Replies.skip``).  Any failure drops
the connection (whatever was half read goes with it); the next exchange
reconnects.  ``loaded`` says whether this connection's Redis was sent the
scripts (each node keeps its own script cache).  A ``READONLY`` reply (the
node was demoted to a replica) drops the connection as a failure does, and
on a sentinel URL a connection the sentinels no longer name the primary of
is dropped before it is written to (``sentinel.stale``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from redis.exceptions import ReadOnlyError

from . import sentinel
from .clients import STALL_TIMEOUT_S, Settings, client
from .resp import Replies, pack
from .scripts import SCRIPTS

__all__ = ["Link"]


class Link:
    """One node's writer connection; ``node`` is its ``host:port`` (None: the URL's own)."""

    def __init__(self, settings: Settings, node: str | None) -> None:
        self.node = node
        self.redis = client(settings, STALL_TIMEOUT_S, node)
        self.loaded = False                   # the scripts were sent (a Redis that lost them says NOSCRIPT)
        self._conn: Any = None                # the one connection, taken from the pool once
        self._replies: Replies | None = None  # what reads the replies on it
        self.exchanges = 0                    # round trips made (for tests and the bench)

    async def exchange(self, payload: bytes, asking: list[bool], expect: bytes, count: int
                       ) -> tuple[list[Any] | None, list[Any]]:
        """Send ``payload``; read one XADD reply per ``asking`` flag (an ``ASKING`` reply before each flagged
        one, dropped) and None for all if they are ``expect``, then ``count`` more replies."""
        self.exchanges += 1
        conn = self._conn
        if conn is None:
            conn = self._conn = await self.redis.connection_pool.get_connection()
        try:
            if sentinel.stale(self.redis, conn):
                await conn.disconnect()     # the sentinels name another primary now: ask them again, connecting
            async with asyncio.timeout(STALL_TIMEOUT_S):
                await conn.send_packed_command(payload, check_health=False)
                replies = self._replies
                if replies is None or replies.stream is not conn._reader:
                    replies = self._replies = Replies(conn._reader)    # a new connection: a new buffer
                added = None
                if asking and not await replies.skip(expect):
                    added = []
                    for ask in asking:
                        if ask:
                            await replies.read()                     # ASKING's +OK (or why not: ASK again)
                        added.append(await replies.read())
                rest = [await replies.read() for _ in range(count)]
            _writable(added, rest)
            return added, rest
        except BaseException:
            self._replies = None
            await conn.disconnect()         # whatever was half read is gone with it; the next round reconnects
            raise

    async def load_scripts(self) -> None:
        """Send every script to this node again (it answered NOSCRIPT: restarted, or its cache flushed)."""
        try:
            await self.exchange(b"".join(pack(("SCRIPT", "LOAD", text)) for text in SCRIPTS.values()), [], b"",
                                len(SCRIPTS))
        except Exception:  # noqa: BLE001 - the next round fails (and says why) or loads them again
            pass

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.disconnect()
            await self.redis.connection_pool.release(self._conn)
            self._conn = None
        await self.redis.aclose()


def _writable(*replies: list[Any] | None) -> None:
    """Raise ``ReadOnlyError`` if any reply is ``READONLY``: the node is a replica now (demoted by a failover),
    so the round fails and the connection is dropped; the next one asks where the primary is (``sentinel``).
    The round is not sent again to the new primary: its log may end before the round's appends (what the
    demoted node took and did not replicate), and an append there would leave a gap."""
    for some in replies:
        for reply in some or ():
            if isinstance(reply, ReadOnlyError):
                raise ReadOnlyError(f"the node answered {reply}: it is a replica now")
