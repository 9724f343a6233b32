"""The clocks (``tokenwire.core.clock``): the virtual clock runs what is due at one instant in schedule order and never
goes backwards, the real one sleeps monotonically, and the unit conversions."""

import pytest

from tokenwire.core.clock import ClockError, RealClock, VirtualClock, ms_to_ns, ns_to_ms


def test_same_instant_runs_in_schedule_order():
    clock, seen = VirtualClock(), []
    clock.call_at(10, lambda: seen.append("a"))
    clock.call_at(5, lambda: seen.append("b"))
    clock.call_at(10, lambda: seen.append("c"))
    assert clock.run() == 10
    assert seen == ["b", "a", "c"]


def test_time_never_goes_backwards():
    clock = VirtualClock()
    clock.call_at(7, lambda: None)
    clock.run()
    with pytest.raises(ClockError, match="cannot schedule at 3 ns, the clock is already at 7 ns"):
        clock.call_at(3, lambda: None)
    with pytest.raises(ClockError, match="delay must be non-negative, got -1 ns"):
        clock.call_later(-1, lambda: None)


def test_real_clock_sleep_until_is_monotonic():
    clock = RealClock()
    start = clock.now()
    clock.sleep_until(start + 1_000_000)
    assert clock.now() >= start + 1_000_000
    clock.sleep_until(0)  # in the past: returns at once


def test_unit_conversions():
    assert ms_to_ns(0.5) == 500_000
    assert ns_to_ms(1_500_000) == 1.5
