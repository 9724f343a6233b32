"""How a stream's answer and one connection to it end: the early endings and the connection's ``Ending``.

How this works: an answer that ends before its last token carries an early
ending (an ``EarlyEnding``: ``reason``, and ``error`` if it failed) that
every reader's closing frame names: ``STOPPED_ENDING`` when someone asked it
to stop (``POST /streams/<id>/stop``), ``LOST`` when a shared log lost its
tokens (``StreamLost``); a model's failure is the model stream's own.  What
ended one connection (the ``done`` frame, a cut, the peer gone...) is an
``Ending``, which the server's access log records.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["LOST", "STOPPED_ENDING", "STOPPED_REASON", "Ending", "Lost", "Stopped"]

# Why an answer stopped early when someone asked it to (``POST /streams/<id>/stop``).
STOPPED_REASON = "stopped"


@dataclass(frozen=True, slots=True)
class Lost:
    """The early ending of a stream whose tokens a shared log lost (``StreamLost``): ``reason`` says so."""

    reason: str = "lost"
    error: str | None = None


LOST = Lost()


@dataclass(frozen=True, slots=True)
class Stopped:
    """The ending of a stream asked to stop (an ``EarlyEnding``): ``reason`` ``stopped``, no error."""

    reason: str = STOPPED_REASON
    error: str | None = None


STOPPED_ENDING = Stopped()


class Ending(StrEnum):
    """How one connection ended."""

    DONE = "done"                  # the done frame was sent
    CUT = "cut"                    # the disconnect policy cut the reader off
    CLOSED_BY_SERVER = "closed"    # the server closed it after cut_after token frames
    PEER_GONE = "peer-gone"        # the reader hung up (or a write failed)
    REPLACED = "replaced"          # the channel was let go under it: the peer declared gone, or the log lost it
