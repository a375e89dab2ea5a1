"""Sliding-window arithmetic: the estimate, when a refused request would fit, and the
reset times in OpenAI's format."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmgw.auth import windows


def test_window_start_is_the_minute_boundary() -> None:
    assert windows.window_start(125.5) == 120
    assert windows.window_start(120.0) == 120


def test_estimate_weights_the_previous_window_by_its_overlap() -> None:
    assert windows.estimate(60, 10, now=135, start=120) == pytest.approx(60 * 0.75 + 10)
    assert windows.estimate(60, 10, now=120, start=120) == 70
    assert windows.estimate(60, 10, now=179.999, start=120) == pytest.approx(10, abs=0.01)


@given(
    previous=st.integers(0, 500),
    current=st.integers(0, 500),
    limit=st.integers(1, 400),
    cost=st.integers(1, 20),
    elapsed=st.floats(0, 59.9),
)
def test_retry_after_is_when_the_cost_first_fits(
    previous: int, current: int, limit: int, cost: int, elapsed: float
) -> None:
    start = 600
    now = start + elapsed
    wait = windows.retry_after(previous, current, limit, cost, now, start)
    if cost > limit:
        assert wait > 60
        return

    def fits_at(t: float) -> bool:
        window = windows.window_start(t)
        if window == start:
            est = windows.estimate(previous, current, t, start)
        elif window == start + 60:
            est = windows.estimate(current, 0, t, window)
        else:
            est = 0
        return est + cost <= limit + 1e-6

    assert fits_at(now + wait + 1e-6)
    if wait > 0.01:
        assert not fits_at(now + wait - 0.01)


def test_until_reset_and_its_format() -> None:
    assert windows.until_reset(0, 5, now=130, start=120) == 110
    assert windows.until_reset(5, 0, now=130, start=120) == 50
    assert windows.until_reset(0, 0, now=130, start=120) == 0
    assert windows.format_reset(0.02) == "20ms"
    assert windows.format_reset(1.0) == "1s"
    assert windows.format_reset(360) == "6m0s"
    assert windows.format_reset(61.2) == "1m2s"
