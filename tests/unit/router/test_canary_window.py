"""The canary's window (both sides, clock injected) and its judgement."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmgw.router.canary_window import CANDIDATE, MODEL, Limits, OutcomeWindow, SideFigures, judge

LIMITS = Limits(min_requests=50, max_error_increase=0.05, max_ttft_ratio=1.5)


def test_each_side_counts_its_own_errors_and_ttft() -> None:
    window = OutcomeWindow(span_s=60)
    for n in range(10):
        window.record(MODEL, float(n), False, 0.1)
        window.record(CANDIDATE, float(n), n % 5 == 0, None if n % 5 == 0 else 0.3)
    model, candidate = window.figures(MODEL, 10.0), window.figures(CANDIDATE, 10.0)
    assert (model.requests, model.errors, model.error_rate) == (10, 0, 0.0)
    assert model.mean_ttft_s == pytest.approx(0.1)
    assert (candidate.requests, candidate.errors, candidate.error_rate) == (10, 2, 0.2)
    assert candidate.mean_ttft_s == pytest.approx(0.3)


def test_old_tries_leave_the_window() -> None:
    window = OutcomeWindow(span_s=60)
    window.record(CANDIDATE, 0.0, True, None)
    window.record(CANDIDATE, 30.0, False, 0.2)
    assert window.figures(CANDIDATE, 59.0).requests == 2
    late = window.figures(CANDIDATE, 61.0)
    assert (late.requests, late.errors) == (1, 0)
    assert late.mean_ttft_s == pytest.approx(0.2)
    assert window.figures(CANDIDATE, 200.0) == SideFigures()


def test_the_window_holds_at_most_its_bound() -> None:
    window = OutcomeWindow(span_s=600, max_per_side=100)
    for n in range(250):
        window.record(MODEL, float(n) / 100, n < 150, 0.1)
    figures = window.figures(MODEL, 3.0)
    assert (figures.requests, figures.errors) == (100, 0)


@given(st.lists(st.tuples(st.booleans(), st.one_of(st.none(), st.floats(0, 10))), max_size=300))
def test_running_sums_match_a_recount(tries: list[tuple[bool, float | None]]) -> None:
    window = OutcomeWindow(span_s=50, max_per_side=120)
    for n, (error, ttft) in enumerate(tries):
        window.record(CANDIDATE, float(n), error, ttft)
    now = float(len(tries))
    kept = [t for n, t in enumerate(tries) if n >= now - 50][-120:]
    figures = window.figures(CANDIDATE, now)
    assert figures.requests == len(kept)
    assert figures.errors == sum(e for e, _ in kept)
    ttfts = [t for _, t in kept if t is not None]
    assert figures.ttft_samples == len(ttfts)
    assert figures.ttft_sum_s == pytest.approx(sum(ttfts), abs=1e-6)


def test_no_verdict_before_min_requests() -> None:
    assert judge(SideFigures(500, 0, 500, 50.0), SideFigures(49, 49, 0, 0.0), LIMITS) is None


def test_an_error_rate_over_the_allowed_increase_rolls_back() -> None:
    verdict = judge(SideFigures(450, 9, 441, 44.1), SideFigures(50, 10, 40, 4.0), LIMITS)
    assert verdict is not None
    assert verdict.reason == "error_rate"
    assert "20.0%" in verdict.sentence()
    assert "canary.max_error_increase" in verdict.sentence()


def test_an_error_rate_within_the_increase_is_kept() -> None:
    # 6 % against 2 %: four points above, under five.
    assert judge(SideFigures(500, 10, 490, 49.0), SideFigures(50, 3, 47, 4.7), LIMITS) is None


def test_a_slow_first_token_rolls_back() -> None:
    verdict = judge(SideFigures(450, 0, 450, 45.0), SideFigures(50, 0, 50, 15.0), LIMITS)
    assert verdict is not None
    assert verdict.reason == "ttft"
    assert "0.300s" in verdict.sentence()
    assert "canary.max_ttft_ratio" in verdict.sentence()


def test_a_first_token_within_the_ratio_is_kept() -> None:
    assert judge(SideFigures(450, 0, 450, 45.0), SideFigures(50, 0, 50, 7.0), LIMITS) is None


def test_ttft_is_not_compared_with_too_few_of_the_models() -> None:
    assert judge(SideFigures(3, 0, 3, 0.3), SideFigures(50, 0, 50, 50.0), LIMITS) is None
