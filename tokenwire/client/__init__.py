"""A Python client that resumes: the SSE events of any server, reconnecting with ``Last-Event-ID``.

``events(url)`` (blocking) and ``aevents(url)`` (async) yield the stream's
events as ``Event`` records (``event``, ``data``, ``id``, ``retry``),
decoded by tokenwire's own decoder, and reconnect by themselves after a
dropped connection until the stream's end event (the README's
"``tokenwire.client``" section).  ``Reconnect`` is the decisions without
I/O; ``tokenwire read URL`` is the command over it.  Needs httpx: ``pip
install 'tokenwire[client]'``.
"""

from __future__ import annotations

try:
    import httpx  # noqa: F401  (checked here, so the message names the extra)
except ImportError as exc:  # pragma: no cover - the test runs it in a fresh interpreter
    raise ImportError("tokenwire.client needs httpx, which is not installed: "
                      "pip install 'tokenwire[client]'") from exc

from ..core.sse import Event
from .reconnect import (
    DEFAULT_MAX_ATTEMPTS,
    END_EVENTS,
    AttemptsExhausted,
    Backoff,
    ClientError,
    ProtocolError,
    Reconnect,
    Request,
    StreamRefused,
)
from .streams import DEFAULT_TIMEOUT, aevents, events

__all__ = [
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_TIMEOUT",
    "END_EVENTS",
    "AttemptsExhausted",
    "Backoff",
    "ClientError",
    "Event",
    "ProtocolError",
    "Reconnect",
    "Request",
    "StreamRefused",
    "aevents",
    "events",
]
