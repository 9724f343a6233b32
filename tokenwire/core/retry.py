"""Trying again what keeps failing: a capped exponential backoff, and one line per cause now and then.

How this works: a loop that retries something that failed (a background
response read to its end inside the server, on a log that fails) holds a
``Backoff``: ``failed()`` returns how long to wait before the next try
(``RETRY_FIRST_S``, doubled per failure in a row, at most ``RETRY_MAX_S``)
and ``succeeded()`` starts over, so a log that keeps failing is asked a few
times a second at most, however fast it fails, and one that came back is
asked again within ``RETRY_MAX_S``.  ``Said`` is what keeps its log quiet:
``due(cause, now)`` is True for a cause not said within ``SAY_EVERY_S``,
so a log that fails for an hour writes a line per cause every ten seconds,
not one per try.  Neither reads a clock: the caller gives ``now``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["RETRY_FIRST_S", "RETRY_MAX_S", "SAY_EVERY_S", "Backoff", "Said"]

# The first retry's wait: a blip (a reconnect, a failover's first second) costs a reader this much.
RETRY_FIRST_S = 0.05
# The longest wait between two tries: 2 s keeps a failing log asked once every 2 s at most (nothing a Redis or
# a CPU notices), and a log that came back is used again within 2 s of its return.
RETRY_MAX_S = 2.0
# How often the same cause is said again while it lasts: an operator sees it, the log does not fill.
SAY_EVERY_S = 10.0
# Causes remembered at once; past it those not said within ``every_s`` are forgotten (a cause may name a
# stream, and streams come and go).
_MAX_CAUSES = 256


@dataclass(slots=True)
class Backoff:
    """The waits of one retry loop: ``first_s`` doubled per failure in a row, at most ``max_s``."""

    first_s: float = RETRY_FIRST_S
    max_s: float = RETRY_MAX_S
    failures: int = 0

    def __post_init__(self) -> None:
        if not 0 < self.first_s <= self.max_s:
            raise ValueError(f"a backoff needs 0 < first_s <= max_s, got {self.first_s!r} and {self.max_s!r}")

    def failed(self) -> float:
        """One more failure in a row: the seconds to wait before the next try."""
        self.failures += 1
        return min(self.max_s, self.first_s * 2.0 ** min(self.failures - 1, 62))

    def succeeded(self) -> None:
        """The try got somewhere: the next failure waits ``first_s`` again."""
        self.failures = 0


@dataclass(slots=True)
class Said:
    """When each cause was last said; ``due`` says whether to say it now (at most every ``every_s``)."""

    every_s: float = SAY_EVERY_S
    _at: dict[str, float] = field(default_factory=dict)

    def due(self, cause: str, now: float) -> bool:
        """True (and noted) if ``cause`` was not said within ``every_s`` before ``now`` (seconds, any clock)."""
        last = self._at.get(cause)
        if last is not None and now - last < self.every_s:
            return False
        if len(self._at) >= _MAX_CAUSES:
            self._at = {said: at for said, at in self._at.items() if now - at < self.every_s}
        self._at[cause] = now
        return True
