"""The sim's quality: errors spread evenly at the rate asked, values checked."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmgw.sim.quality import Quality, QualityState, check_quality, fails


def test_a_fifth_fails_every_fifth_request() -> None:
    assert [n for n in range(1, 21) if fails(0.2, n)] == [5, 10, 15, 20]


@given(st.floats(0, 1), st.integers(1, 5000))
def test_the_failures_are_the_rate_of_the_requests(rate: float, count: int) -> None:
    failed = sum(fails(rate, n) for n in range(1, count + 1))
    assert abs(failed - rate * count) <= 1


def test_the_spread_restarts_when_the_rate_is_set() -> None:
    state = QualityState(Quality(error_rate=0.5))
    assert [state.on_request() for _ in range(4)] == [False, True, False, True]
    state.set(Quality(error_rate=0.25))
    assert [state.on_request() for _ in range(4)] == [False, False, False, True]
    state.set(Quality())
    assert not any(state.on_request() for _ in range(10))


def test_the_ttft_factor_holds_a_request_for_the_rest_of_its_first_token() -> None:
    assert QualityState(Quality(ttft_factor=3)).extra_wait_s(0.02) == pytest.approx(0.04)
    assert QualityState(Quality()).extra_wait_s(0.02) == 0


@pytest.mark.parametrize(
    ("error_rate", "ttft_factor", "fragment"),
    [
        (1.5, 1, "error_rate: must be between 0 and 1"),
        (-0.1, 1, "error_rate: must be between 0 and 1"),
        ("a lot", 1, "error_rate: must be a number"),
        (True, 1, "error_rate: must be a number"),
        (0, 0.5, "ttft_factor: must be between 1 and 1000"),
        (0, None, "ttft_factor: must be a number"),
    ],
)
def test_values_out_of_range_are_refused_by_name(
    error_rate: object, ttft_factor: object, fragment: str
) -> None:
    with pytest.raises(ValueError, match=fragment):
        check_quality(error_rate, ttft_factor)
