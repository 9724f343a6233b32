"""The live endpoints' settings: their limits, each a named default, ``LiveConfig``, and the journal's record.

How this works: ``LiveConfig`` holds what a ``tokenwire serve`` flag (or the
demo) can change (every time in seconds); the other limits are constants, each with
why that number (the README lists them).  ``ConnectionLog`` is what the
server remembers of each finished event-stream connection, in a journal of
at most ``JOURNAL_SIZE`` entries, for tests and the demo to inspect.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..core.channel import ChannelStats
from ..core.stream import Ending

__all__ = [
    "DEFAULT_GRACE_S",
    "DEFAULT_HEARTBEAT_S",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_REQUEST_TIMEOUT_S",
    "DEFAULT_WRITE_TIMEOUT_S",
    "JOURNAL_SIZE",
    "MAX_BODY_BYTES",
    "MAX_CHAT_BODY_BYTES",
    "MAX_DURATION_ENV",
    "MAX_HEADER_BYTES",
    "MAX_REQUEST_LINE",
    "PAGE_PROCESSES",
    "REAL_PAGES",
    "REQUEST_QUEUE_SIZE",
    "RETRY_AFTER_S",
    "ConnectionLog",
    "LiveConfig",
    "max_duration_setting",
]

# A reader that has not taken a single byte for this long is treated as gone
# (a half-open connection, a suspended laptop, a client that stopped
# reading): long enough for a browser tab in the background to catch up,
# short enough that a dead reader does not pin a producer.
DEFAULT_WRITE_TIMEOUT_S = 10.0
# A silent stream sends ": ping" this often.  Proxies and load balancers
# commonly close a connection idle for 30-60 s; 15 s stays well inside that
# (sse-starlette and many hubs use the same figure).
DEFAULT_HEARTBEAT_S = 15.0
# A client has this long, in total, to send its request line, headers and
# body (slowloris: a trickle of one byte at a time does not extend it).  Real
# clients send the whole request in one packet, so this only needs to cover a
# slow network round trip.
DEFAULT_REQUEST_TIMEOUT_S = 10.0
# Longest request line (method, target, version).  The longest real one here
# is a report query of a few hundred bytes; 8 KiB is what nginx and most
# proxies accept by default.
MAX_REQUEST_LINE = 8 * 1024
# All header lines together.  Browsers send 1-2 KiB; 16 KiB is generous and
# still bounds what each connection parses and holds.
MAX_HEADER_BYTES = 16 * 1024
# A POST /streams carries its parameters in the query; a body is not needed
# and is read and discarded up to this size (a form post), refused above.
MAX_BODY_BYTES = 1024
# A POST /chat carries the whole conversation as JSON (the AI SDK sends every
# message each time): a long chat with pasted documents runs to hundreds of
# KB, so 1 MiB, as Next.js's and Express's defaults allow.
MAX_CHAT_BODY_BYTES = 1 << 20
# Pending connections the kernel queues before accept() (capped by
# net.core.somaxconn, 4096 on current kernels).  A small queue drops the
# SYNs of a burst of clients, and each dropped one retries a second later:
# a thousand EventSources opened at once would wait a second for their first
# token.  asyncio's own default is 100.
REQUEST_QUEUE_SIZE = 4096
# What a 503 asks the client to wait, in seconds: a full server frees a slot
# as soon as any stream ends, and an EventSource retries after `retry` anyway.
RETRY_AFTER_S = 1
# Open connections at once (streams, pages, requests still arriving): past
# it a new connection takes the slot of an idle one or gets an immediate 503.
# Above the 1,000-stream bench; the descriptor limit caps it further (the
# soft limit less what is open and a margin), and ``tokenwire serve`` raises
# the soft limit to the hard one.
DEFAULT_MAX_CONNECTIONS = 4000
# Report pages rendered at once, each in a process of its own: a render is
# ~10 ms of CPU, and in a thread it would hold the GIL the streams' loop
# needs (200 streams then miss their pace).  Two, for the two cores the
# loop shares them with.
PAGE_PROCESSES = 2
# clock=real pages at once, each in a process: seconds of real-time work; past it 503.
REAL_PAGES = 2
# Where a deployment sets max_duration_s (a platform's time limit less a margin): tokenwire serve and the ASGI app.
MAX_DURATION_ENV = "TOKENWIRE_MAX_DURATION_S"
# How long a SIGTERM lets open streams run to their `done` before closing them.
DEFAULT_GRACE_S = 10.0
# How many finished connections the server remembers for inspection
# (tests, the demo): bounded, so a long-running server does not grow.
JOURNAL_SIZE = 1024


def max_duration_setting(given: float | None) -> float | None:
    """``given``, else ``$TOKENWIRE_MAX_DURATION_S``, else None (no limit); raises ``ValueError`` naming a bad value."""
    if given is not None:
        return given
    value = os.environ.get(MAX_DURATION_ENV, "").strip()
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"${MAX_DURATION_ENV} must be a number of seconds, got {value!r}") from None


@dataclass(frozen=True, slots=True)
class LiveConfig:
    """How the live endpoints behave; every time in seconds.

    sndbuf: shrink ``SO_SNDBUF`` of event-stream connections to this many
    bytes (the demo, to make the kernel's queue small and visible); None
    leaves the kernel's autotuning alone.  sample_queues: record the send
    queue (``TIOCOUTQ``) after each frame and keep each connection's wire.
    access_log: log one line per request (``tokenwire.access``) and the shutdown notice.  max_connections:
    open connections at once (more get 503).  grace_s: how long a SIGTERM
    lets open streams run to their end.  max_duration_s: end each event-stream
    connection after this long, at a frame boundary (its reader reconnects
    with ``Last-Event-ID`` at once; the stream goes on), before a platform
    that caps a response's duration kills it; None: no limit.
    """

    heartbeat_s: float = DEFAULT_HEARTBEAT_S
    write_timeout_s: float = DEFAULT_WRITE_TIMEOUT_S
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S
    sndbuf: int | None = None
    sample_queues: bool = False
    access_log: bool = True
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    grace_s: float = DEFAULT_GRACE_S
    max_duration_s: float | None = None

    def __post_init__(self) -> None:
        if self.sndbuf is not None and (isinstance(self.sndbuf, bool) or not isinstance(self.sndbuf, int)
                                        or not 1 <= self.sndbuf < 2**31):
            raise ValueError(f"sndbuf must be None or a positive int of bytes below 2**31, got {self.sndbuf!r}")
        duration = self.max_duration_s
        if duration is not None and (isinstance(duration, bool) or not isinstance(duration, (int, float))
                                     or not 0 < duration < 86_400):
            raise ValueError(f"max_duration_s must be a number of seconds above 0 and below a day, got {duration!r}")
        if isinstance(self.max_connections, bool) or not isinstance(self.max_connections, int) \
                or not 1 <= self.max_connections <= 1_000_000:
            raise ValueError(f"max_connections must be an int from 1 to 1000000, got {self.max_connections!r}")
        if isinstance(self.grace_s, bool) or not isinstance(self.grace_s, (int, float)) \
                or not 0 <= self.grace_s <= 3600:
            raise ValueError(f"grace_s must be a number of seconds from 0 to 3600, got {self.grace_s!r}")
        for name in ("heartbeat_s", "write_timeout_s", "request_timeout_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 86_400:
                raise ValueError(f"{name} must be a number of seconds above 0 and below a day, got {value!r}")


@dataclass(frozen=True, slots=True)
class ConnectionLog:
    """One finished event-stream connection, as the server saw it.

    last_event_id_header: the ``Last-Event-ID`` header sent (None if
    absent); cursor: the exclusive resume cursor used; tokens_sent: the
    log entries (tokens and parts) whose frames the wire took, in any
    dialect; generated: tokens in the log when the
    connection ended (-1: the log no longer held the stream, it was
    evicted under the connection); failure: why the wire declared the peer
    gone; stats: the connection's channel statistics.
    """

    stream_id: str
    last_event_id_header: str | None
    last_event_id_query: str | None
    cursor: int
    cut_after: int | None
    ending: Ending
    tokens_sent: int
    bytes_sent: int
    generated: int
    failure: str | None
    stats: ChannelStats
