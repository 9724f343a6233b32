"""Latency metrics named as serving tools name them.

How this works: everything is computed from the reader's arrival times, in
ns since the request started.  TTFT is the first arrival; ITL the gaps
between consecutive arrivals (TTFT excluded); end-to-end the last arrival;
throughput tokens delivered over end-to-end.  Percentiles interpolate
linearly between closest ranks, numpy's default and
``statistics.quantiles(method="inclusive")``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

__all__ = ["Timing", "percentile", "timing_from_arrivals"]


def percentile(values: Sequence[float], q: float) -> float:
    """Return the ``q``-th percentile (0..100) by linear interpolation.

    Raises ``ValueError`` for an empty sequence or ``q`` outside 0..100.
    """
    if not values:
        raise ValueError("percentile of an empty sequence")
    if not 0 <= q <= 100:
        raise ValueError(f"q must be within 0..100, got {q!r}")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass(frozen=True, slots=True)
class Timing:
    """Reader-side latency figures, all in ms except ``tokens`` and ``tokens_per_s``.

    ``itl_*`` are None when fewer than two tokens arrived; ``first_token_share``
    is TTFT over end-to-end (0..1).
    """

    tokens: int
    ttft_ms: float
    total_ms: float
    first_token_share: float
    itl_p50_ms: float | None
    itl_p95_ms: float | None
    itl_p99_ms: float | None
    itl_max_ms: float | None
    tokens_per_s: float


def timing_from_arrivals(arrivals_ns: Sequence[int]) -> Timing:
    """Return the figures for tokens that arrived at ``arrivals_ns``.

    Raises ``ValueError`` when no token arrived or the times go backwards.
    """
    if not arrivals_ns:
        raise ValueError("no token arrived, so there is no timing to report")
    gaps = [b - a for a, b in pairwise(arrivals_ns)]
    if any(g < 0 for g in gaps) or arrivals_ns[0] < 0:
        raise ValueError(f"arrival times must not go backwards, got {list(arrivals_ns)[:8]!r}...")
    ttft, total = arrivals_ns[0], arrivals_ns[-1]
    itl = [g / 1e6 for g in gaps]

    def pct(q: float) -> float | None:
        return percentile(itl, q) if itl else None

    return Timing(
        tokens=len(arrivals_ns),
        ttft_ms=ttft / 1e6,
        total_ms=total / 1e6,
        first_token_share=ttft / total if total else 1.0,
        itl_p50_ms=pct(50), itl_p95_ms=pct(95), itl_p99_ms=pct(99),
        itl_max_ms=max(itl) if itl else None,
        tokens_per_s=len(arrivals_ns) / (total / 1e9) if total else float("inf"),
    )
