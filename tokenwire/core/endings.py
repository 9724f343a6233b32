"""How a stream's answer and one connection to it end: the early endings and the connection's ``Ending``.

How this works: an answer that ends before its last token carries an
``EarlyEnd`` (``reason``, and ``error`` if it failed) that every reader's
closing frame names: ``STOPPED`` when someone asked it to stop (``POST
/streams/<id>/stop``), ``LOST`` when a shared log lost its tokens
(``StreamLost``), ``CANCELLED`` when its last reader left or the server shut
down, ``OWNER_LOST`` when the process generating it died, ``failed(...)``
when the model raised.  Endings are values: two with the same reason and
error are the same ending, wherever they were made.  ``ending_state`` is
what the log records for one.  What ended one connection (the ``done``
frame, a cut, the peer gone...) is an ``Ending``, which the server's access
log records.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from .tokenlog import StreamState

__all__ = ["CANCELLED", "LOST", "OWNER_LOST", "PREFIX_TRIMMED", "STOPPED", "STOPPED_REASON", "EarlyEnd", "Ending",
           "ending_state", "failed", "raised"]

# Why an answer stopped early when someone asked it to (``POST /streams/<id>/stop``).
STOPPED_REASON = "stopped"


@dataclass(frozen=True, slots=True)
class EarlyEnd:
    """Why an answer ended before its model did: ``reason``, and the ``failed`` event's message if it failed."""

    reason: str
    error: str | None = None


# Asked to stop (``POST /streams/<id>/stop``, on any process).
STOPPED = EarlyEnd(STOPPED_REASON)
# A shared log lost the stream's tokens (Redis evicted them): nothing is generated again.
LOST = EarlyEnd("lost")
# The last reader left (``on_disconnect="cancel"``), or the server shut down.
CANCELLED = EarlyEnd("cancelled")
# The process generating it died, and nobody continues it.
OWNER_LOST = EarlyEnd("owner lost")
# A continuation that cannot be made: the log no longer holds the whole prefix (trimmed to its maxlen).
PREFIX_TRIMMED = EarlyEnd("prefix trimmed")


def failed(message: str) -> EarlyEnd:
    """The ending of a model that failed: the ``failed`` event says ``message``."""
    return EarlyEnd("failed", message)


def raised(exc: BaseException) -> str:
    """What the ``failed`` event says of a model (or its producer) that raised ``exc``: its type, never its
    message, which may hold a secret (the server's log line has that)."""
    return f"the model raised {type(exc).__name__}"


def ending_state(ending: EarlyEnd | None) -> StreamState:
    """The log's state for an answer that ended so: done, stopped (asked to), or cancelled (any other early end)."""
    if ending is None:
        return StreamState.DONE
    return StreamState.STOPPED if ending == STOPPED else StreamState.CANCELLED


class Ending(StrEnum):
    """How one connection ended."""

    DONE = "done"                  # the done frame was sent
    CUT = "cut"                    # the disconnect policy cut the reader off
    CLOSED_BY_SERVER = "closed"    # the server closed it after cut_after token frames
    PEER_GONE = "peer-gone"        # the reader hung up (or a write failed)
    REPLACED = "replaced"          # the channel was let go under it: the peer declared gone, or the log lost it
