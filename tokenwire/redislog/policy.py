"""What tokenwire needs of Redis's memory settings, asked once per Redis server at the log's first connection.

How this works: tokenwire keeps a stream's keys in Redis until their TTL.
A Redis that evicts keys under memory pressure (``maxmemory`` reached with
any ``maxmemory-policy`` but ``noeviction``; every tokenwire key has a TTL,
so the ``volatile-*`` policies evict them too) may take a stream's tokens
key, and such a stream is lost: never generated again, its readers told so
(the early-stop ``done``, ``"reason": "lost"``; a resume gets 410).  So
when a log's writer first connects (``ask``), one ``CONFIG GET
maxmemory-policy`` goes in its first round, and an evicting policy is
warned about on the ``tokenwire`` logger, once per Redis (its redacted
``where``) per process.  A Redis that refuses ``CONFIG`` (hosted Redis often
does, or an ACL) is not asked again by that connection and nothing is said;
a Redis that was away is asked again by the next connection.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import Any

from .writer import LogWriter

__all__ = ["NO_EVICTION", "ask"]

# The one maxmemory-policy under which Redis never evicts a key (writes past maxmemory are refused instead).
NO_EVICTION = "noeviction"

logger = logging.getLogger("tokenwire")

# The Redis servers (their redacted URL) asked, or being asked, in this process.
_asked: set[str] = set()


def ask(writer: LogWriter, where: str) -> None:
    """Queue ``CONFIG GET maxmemory-policy`` on ``writer`` unless Redis ``where`` was asked already."""
    if where in _asked:
        return
    _asked.add(where)
    writer.command("CONFIG", "GET", "maxmemory-policy").add_done_callback(functools.partial(_answered, where))


def _answered(where: str, done: asyncio.Future[Any]) -> None:
    if done.cancelled() or done.exception() is not None:
        if "ResponseError" not in str(done.exception()):
            _asked.discard(where)           # Redis was away: the next connection asks again
        return                              # refused: CONFIG is not allowed here, nothing to say
    reply = done.result()
    pairs = dict(reply) if isinstance(reply, dict) else dict(zip(reply[::2], reply[1::2], strict=True))
    policy = str(pairs.get("maxmemory-policy", NO_EVICTION))
    if policy != NO_EVICTION:
        logger.warning("redis at %s may evict keys (maxmemory-policy %s): a stream whose tokens it evicts is lost "
                       "(its readers get the early-stop done, reason 'lost'; a resume gets 410); tokenwire needs "
                       "maxmemory-policy noeviction, or a maxmemory that holds every stream kept", where, policy)
