"""The timing figures (``tokenwire.core.metrics``): percentiles as ``statistics``' inclusive method gives them, and
time to first token, inter-token gaps and throughput from arrival times, with their edges and errors."""

import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokenwire.core.metrics import percentile, timing_from_arrivals


@given(st.lists(st.floats(-1e6, 1e6), min_size=2, max_size=50))
def test_percentile_matches_statistics_inclusive(values):
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    for q in (1, 25, 50, 95, 99):
        assert percentile(values, q) == pytest.approx(cuts[q - 1], rel=1e-9, abs=1e-6)


def test_percentile_edges():
    assert percentile([3.0], 95) == 3.0
    assert percentile([1.0, 2.0], 0) == 1.0 and percentile([1.0, 2.0], 100) == 2.0
    with pytest.raises(ValueError, match="percentile of an empty sequence"):
        percentile([], 50)
    with pytest.raises(ValueError, match="q must be within 0..100, got 101"):
        percentile([1.0], 101)


def test_timing_figures():
    t = timing_from_arrivals([2_000_000, 3_000_000, 5_000_000, 6_000_000])
    assert t.ttft_ms == 2.0 and t.total_ms == 6.0
    assert t.first_token_share == pytest.approx(1 / 3)
    assert t.itl_p50_ms == 1.0 and t.itl_max_ms == 2.0
    assert t.tokens_per_s == pytest.approx(4 / 0.006)


def test_timing_single_token_and_errors():
    t = timing_from_arrivals([1_000_000])
    assert t.itl_p50_ms is None and t.tokens == 1
    with pytest.raises(ValueError, match="no token arrived"):
        timing_from_arrivals([])
    with pytest.raises(ValueError, match="arrival times must not go backwards"):
        timing_from_arrivals([5, 3])
