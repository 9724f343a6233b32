"""A histogram in plain ints, cheap enough for the per-token path; read whole at scrape time.

How this works: ``Buckets(bounds)`` keeps a count per upper bound (the last
one for values past every bound, Prometheus's ``+Inf``) and the sum of what
was observed.  ``observe_ns`` is a list index, a comparison or two and two
additions: no lock (each process's streams run on one thread) and nothing
from a metrics library; the exposition
(``tokenwire.endpoints.exposition``) turns it into a Prometheus histogram
when it is scraped.  ``cumulative`` gives the counts as Prometheus reads
them (each bucket counts what is at or below its bound).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence

__all__ = ["Buckets"]

# The coarse steps of ``observe_ns``: 2**20 ns (about 1 ms) each, 4,096 of them (about 4.3 s; slower values
# are bisected): a list of 4,096 small ints per histogram.
_SHIFT = 20
_COARSE = 4096


class Buckets:
    """Counts of observations (in ns) per upper bound (in seconds), and their sum; raises ``ValueError``
    for bounds that are not positive and increasing."""

    __slots__ = ("bounds", "_bounds_ns", "_coarse", "counts", "sum_ns")

    def __init__(self, bounds: Sequence[float]) -> None:
        if not bounds or any(b <= 0 for b in bounds) or list(bounds) != sorted(set(bounds)):
            raise ValueError(f"bounds must be positive and increasing, got {list(bounds)!r}")
        self.bounds = tuple(float(b) for b in bounds)
        self._bounds_ns = [round(b * 1e9) for b in self.bounds]
        # The first bucket each 2**_SHIFT ns step can fall in, up to _COARSE steps: a value's bucket is then
        # one list index and a comparison or two, where a bisect of ns-sized ints cost a few hundred ns.
        steps = min(_COARSE, (self._bounds_ns[-1] >> _SHIFT) + 1)
        self._coarse = [bisect_left(self._bounds_ns, step << _SHIFT) for step in range(steps)]
        self._bounds_ns.append(1 << 62)                  # a sentinel past every value: the +Inf bucket
        self.counts = [0] * (len(self.bounds) + 1)      # the last: past every bound (+Inf)
        self.sum_ns = 0

    def observe_ns(self, value_ns: int) -> None:
        """Count one observation of ``value_ns`` >= 0 nanoseconds (at a bound counts in that bound's bucket)."""
        bounds = self._bounds_ns
        try:
            i = self._coarse[value_ns >> _SHIFT]
        except IndexError:                              # past the coarse steps
            i = bisect_left(bounds, value_ns)
        while value_ns > bounds[i]:
            i += 1
        self.counts[i] += 1
        self.sum_ns += value_ns

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[str, int]]:
        """``[(le, count at or below it), ..., ("+Inf", count)]``, as a Prometheus histogram's buckets."""
        out, running = [], 0
        for bound, count in zip((*(repr(b) for b in self.bounds), "+Inf"), self.counts, strict=True):
            running += count
            out.append((bound, running))
        return out

    @staticmethod
    def merged(parts: Iterable[Buckets], bounds: Sequence[float]) -> Buckets:
        """One ``Buckets`` of ``bounds`` holding every part's counts (the parts must have the same bounds)."""
        total = Buckets(bounds)
        for part in parts:
            if part.bounds != total.bounds:
                raise ValueError(f"cannot merge buckets {part.bounds!r} into {total.bounds!r}")
            total.counts = [a + b for a, b in zip(total.counts, part.counts, strict=True)]
            total.sum_ns += part.sum_ns
        return total
