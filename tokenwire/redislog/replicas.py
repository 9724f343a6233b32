"""``min_replicas=N``: tokens reach readers only once N replicas have them, one ``WAIT`` per round.

How this works: Redis replicates asynchronously, so a token the primary took may be lost by a
failover that promotes a replica without it, after a reader was sent it (the reader then holds an
index the log does not, and the log going on from its end would splice another answer onto it).
With ``min_replicas`` set, each round of the writer ends with ``WAIT N REPLICA_ACK_TIMEOUT_MS`` in
the same pipeline (``wait_command``), and no reply of the round is handed to its askers until the
``WAIT`` says N replicas acknowledged it (``acknowledged``).  ``WAIT`` waits for everything Redis had
taken when the command before it ran, whoever wrote it (a connection's offset is the primary's
after its every command), so the reads of the round (a resume's snapshot) wait for the tokens they
return too, not only for this process's own appends.  The followers' shared read (``reader``) reads on
a connection of its own: what it brings waits for a round of the writer that starts after it
(``barrier``).  Fewer than N acknowledgements within the timeout (a replica partitioned away, none
left after a promotion) fail the round as a Redis that does not answer does: ``LogUnavailable``, its
streams end without ``done`` and requests get 503, until the replicas answer again.

``ask`` asks each Redis once per process (``ROLE``, which the log's ACL rule allows already: ``INFO``
may be refused) how many replicas it has, and warns
on the ``tokenwire`` logger when it has some and ``min_replicas`` is 0; ``warning`` is that line for
the banner.  On a Redis Cluster ``min_replicas`` is refused: a ``WAIT`` speaks for one node's writes,
and the followers read several nodes.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import TYPE_CHECKING, Any, Protocol

from .resp import pack

if TYPE_CHECKING:
    from .clients import Settings


class Writer(Protocol):
    """What this module asks of the log's writer (``writer.LogWriter``, which imports this module)."""

    settings: Settings

    def command(self, *args: object) -> asyncio.Future[Any]: ...

__all__ = ["REPLICA_ACK_TIMEOUT_MS", "TooFewReplicas", "Writer", "acknowledged", "ask", "barrier", "count_of",
           "wait_command", "warning"]

# How long a round waits for its replicas' acknowledgements before it fails (the round's streams end without
# `done`, requests get 503): a replica in reach acknowledges within a round trip (the primary asks it at
# once, REPLCONF GETACK), so half a second is a replica gone or wedged; it is half of a request's wait for
# Redis (clients.OP_TIMEOUT_S, 1 s), so the request's 503 (and the server's log) says why: too few replicas.
REPLICA_ACK_TIMEOUT_MS = 500

logger = logging.getLogger("tokenwire")

# What each Redis (its redacted URL) said of its replicas, asked once per process: connected_slaves.
_replicas: dict[str, int] = {}


class TooFewReplicas(Exception):
    """A round's ``WAIT`` got fewer acknowledgements than ``min_replicas`` (or an error)."""


def count_of(value: object) -> int:
    """``min_replicas`` as given (a query's text or an int); raises ``ValueError`` unless it is an int >= 0."""
    number = int(value) if isinstance(value, str) and value.isascii() and value.isdigit() else value
    if isinstance(number, bool) or not isinstance(number, int) or number < 0:
        raise ValueError(f"min_replicas must be a non-negative int, got {value!r}")
    return number


def wait_command(settings: Settings, cluster: bool) -> bytes:
    """The ``WAIT`` that ends every round (b"" for ``min_replicas`` 0); raises ``TooFewReplicas`` on a cluster."""
    if not settings.min_replicas:
        return b""
    if cluster:
        raise TooFewReplicas(f"min_replicas={settings.min_replicas} is not supported on a Redis Cluster (a WAIT "
                             f"speaks for one node's writes)")
    return pack(("WAIT", settings.min_replicas, REPLICA_ACK_TIMEOUT_MS))


def acknowledged(settings: Settings, replies: list[Any], wait: bytes) -> None:
    """Take ``WAIT``'s reply off the end of a round's ``replies`` if the round was sent with ``wait``; raise
    ``TooFewReplicas`` unless it counts ``min_replicas`` replicas."""
    if not wait:
        return
    reply = replies.pop()
    if isinstance(reply, int) and reply >= settings.min_replicas:
        return
    said = f"{reply}" if isinstance(reply, Exception) else f"{reply} of them acknowledged within " \
                                                            f"{REPLICA_ACK_TIMEOUT_MS} ms"
    raise TooFewReplicas(f"min_replicas={settings.min_replicas}: {said}")


async def barrier(writer: Writer) -> None:
    """Return once everything Redis holds now is on ``min_replicas`` replicas (a round of ``writer``, whose
    ``WAIT`` covers it); at once for ``min_replicas`` 0.  Raises the round's ``LogUnavailable``."""
    if writer.settings.min_replicas:
        await writer.command("PING")


def ask(writer: Writer, settings: Settings) -> None:
    """Queue ``ROLE`` on ``writer`` unless this Redis was asked already (see the module)."""
    if settings.where in _replicas:
        return
    _replicas[settings.where] = 0
    writer.command("ROLE").add_done_callback(functools.partial(_answered, settings))


def _answered(settings: Settings, done: asyncio.Future[Any]) -> None:
    if done.cancelled() or done.exception() is not None:
        if "ResponseError" not in str(done.exception()):
            _replicas.pop(settings.where, None)     # Redis was away: the next connection asks again
        return                                      # refused (an ACL without ROLE): nothing to say
    count = _connected(done.result())
    _replicas[settings.where] = count
    said = warning(settings)
    if said is not None:
        logger.warning("redis at %s: %s", settings.where, said)


def _connected(reply: Any) -> int:
    """How many replicas ``ROLE``'s reply lists (``master``, its offset, one entry a connected replica); 0 for a
    node that is not a primary."""
    if not isinstance(reply, list | tuple) or len(reply) < 3:
        return 0
    role = reply[0].decode() if isinstance(reply[0], bytes) else str(reply[0])
    return len(reply[2]) if role == "master" and isinstance(reply[2], list | tuple) else 0


def warning(settings: Settings) -> str | None:
    """What to say of a Redis with replicas and ``min_replicas`` 0 (None: nothing, or not known yet)."""
    count = _replicas.get(settings.where, 0)
    if not count or settings.min_replicas:
        return None
    return (f"the primary has {count} replica{'s' if count > 1 else ''} and min_replicas is 0: a failover may "
            f"lose tokens readers were sent (such a stream ends as lost); add ?min_replicas=1 (docs/redis.md, "
            f"'Failover')")
