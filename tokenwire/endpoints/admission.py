"""Admission to a live server: how many event streams it holds open at once, and how fast a client may create them.

How this works: open event streams take one of ``max_live`` slots (the
registry's ``open_slot``), and past it a request is refused with ``Busy``
(503 with ``Retry-After``).  ``CreationQuota`` is the per-client creation
quota: a token bucket per client address, so one client's flood is refused
(``OverQuota``, 429) before it can crowd out other clients' streams.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict

__all__ = ["DEFAULT_CREATE_BURST", "DEFAULT_CREATE_RATE", "DEFAULT_MAX_LIVE", "QUOTA_CLIENTS", "Busy",
           "CreationQuota", "OverQuota"]

# Open event streams at once.  Each costs a socket, a writer and a producer
# on the one event loop (a few KiB); 1,024 holds the 1,000-stream bench and
# refuses a flood with 503 long before file descriptors run out (the common
# default limit is 1,024 per process; ``tokenwire serve`` raises its soft limit).
DEFAULT_MAX_LIVE = 1024
# Streams one client address may create in a burst, and how fast its
# allowance refills: a load test that opens 2,000 streams from one address
# at once passes; a client creating streams without pause is held to 50 a
# second (429 with Retry-After).
DEFAULT_CREATE_BURST = 2048
DEFAULT_CREATE_RATE = 50.0
# Client addresses whose allowance is remembered (the least recently seen
# is forgotten past it; a forgotten client starts with a full burst).
QUOTA_CLIENTS = 4096


class OverQuota(Exception):
    """A client address has used up its stream-creation allowance; ``retry_after_s`` until the next one."""

    def __init__(self, client: str, retry_after_s: int) -> None:
        super().__init__(f"too many new streams from {client}: try again in {retry_after_s} s")
        self.client, self.retry_after_s = client, retry_after_s


class Busy(Exception):
    """The server already holds ``max_live`` open event streams."""

    def __init__(self, max_live: int) -> None:
        super().__init__(f"too many open streams: this server holds at most {max_live}")
        self.max_live = max_live


class CreationQuota:
    """Stream creations per client address: ``burst`` at once, refilled at ``rate`` a second.

    Raises ``ValueError`` for a ``burst`` below 1 or a ``rate`` that is not a positive number.
    """

    def __init__(self, burst: int = DEFAULT_CREATE_BURST, rate: float = DEFAULT_CREATE_RATE) -> None:
        if isinstance(burst, bool) or not isinstance(burst, int) or burst < 1:
            raise ValueError(f"create_burst must be a positive int, got {burst!r}")
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 < rate < 1e9:
            raise ValueError(f"create_rate must be a positive number of streams per second, got {rate!r}")
        self.burst, self.rate = burst, float(rate)
        self._allowance: OrderedDict[str, tuple[float, float]] = OrderedDict()   # client -> (tokens, when)
        self._lock = threading.Lock()

    def admit(self, client: str) -> None:
        """Take one stream creation from ``client``'s allowance; raises ``OverQuota`` when it has none."""
        now = time.monotonic()
        with self._lock:
            tokens, then = self._allowance.pop(client, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - then) * self.rate)
            if tokens < 1:
                self._allowance[client] = (tokens, now)
                raise OverQuota(client, max(1, math.ceil((1 - tokens) / self.rate)))
            self._allowance[client] = (tokens - 1, now)
            while len(self._allowance) > QUOTA_CLIENTS:
                self._allowance.popitem(last=False)
