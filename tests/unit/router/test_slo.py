"""The SLO tracker: recent time to first token and time per output token per model, and
whether the p99 of either is past the model's objective. The clock is passed in; the
verdict is recomputed at most every half second, samples count for a minute and the
window holds the last 500."""

from __future__ import annotations

import pytest

from llmgw.router.slo import Objective, SloTracker

T = 1000.0
RECHECK = 0.5


def tracker(ttft: float = 0.2, tpot: float = 0.0, model: str = "m") -> SloTracker:
    return SloTracker({model: Objective(ttft_p99=ttft, tpot_p99=tpot)})


def test_a_model_without_samples_is_not_breached() -> None:
    assert not tracker().breached("m", T)


def test_a_model_without_an_objective_is_never_breached() -> None:
    slo = SloTracker({"zero": Objective(ttft_p99=0.0, tpot_p99=0.0)})
    for model in ("zero", "unlisted"):
        slo.observe(model, T, ttft=100.0, tpot=100.0)
        assert not slo.breached(model, T)


def test_a_ttft_p99_past_the_objective_is_a_breach() -> None:
    slo = tracker(ttft=0.2)
    slo.observe("m", T, ttft=0.25, tpot=None)
    assert slo.breached("m", T)


def test_a_p99_exactly_at_the_objective_is_not_a_breach() -> None:
    slo = tracker(ttft=0.2)
    slo.observe("m", T, ttft=0.2, tpot=None)
    assert not slo.breached("m", T)


def test_a_tpot_p99_past_the_objective_is_a_breach_on_its_own() -> None:
    slo = tracker(ttft=0.2, tpot=0.05)
    slo.observe("m", T, ttft=0.01, tpot=0.06)
    assert slo.breached("m", T)


def test_a_measure_with_no_objective_is_not_judged() -> None:
    slo = tracker(ttft=0.0, tpot=0.05)
    slo.observe("m", T, ttft=30.0, tpot=0.01)
    assert not slo.breached("m", T)


def test_missing_measures_are_not_samples() -> None:
    slo = tracker(ttft=0.2, tpot=0.05)
    slo.observe("m", T, ttft=None, tpot=None)
    assert not slo.breached("m", T)


@pytest.mark.parametrize(("slow", "breached"), [(5, False), (6, True)])
def test_it_is_the_99th_percentile_not_the_worst_case(slow: int, breached: bool) -> None:
    """Of 500 samples, p99 is the 495th smallest: five slow ones are the 1 % above it."""
    slo = tracker(ttft=0.2)
    for i in range(500):
        slo.observe("m", T, ttft=1.0 if i < slow else 0.1, tpot=None)
    assert slo.breached("m", T) is breached


def test_the_window_keeps_the_last_500_samples() -> None:
    slo = tracker(ttft=0.2)
    for _ in range(6):
        slo.observe("m", T, ttft=1.0, tpot=None)
    for _ in range(494):
        slo.observe("m", T, ttft=0.1, tpot=None)
    assert slo.breached("m", T)  # six slow of 500: past the p99
    slo.observe("m", T, ttft=0.1, tpot=None)  # pushes the oldest slow one out: five of 500
    assert not slo.breached("m", T + RECHECK)


def test_samples_older_than_a_minute_no_longer_count() -> None:
    slo = tracker(ttft=0.2)
    slo.observe("m", T, ttft=1.0, tpot=None)
    assert slo.breached("m", T + 60.0)
    assert not slo.breached("m", T + 60.0 + RECHECK)


def test_the_verdict_is_cached_for_half_a_second() -> None:
    slo = tracker(ttft=0.2)
    assert not slo.breached("m", T)
    slo.observe("m", T + 0.1, ttft=1.0, tpot=None)
    assert not slo.breached("m", T + 0.49)
    assert slo.breached("m", T + RECHECK)
    slo.observe("m", T + 0.6, ttft=0.1, tpot=None)  # a fast one does not clear a p99 of two
    assert slo.breached("m", T + 1.0)


def test_models_are_judged_apart() -> None:
    slo = SloTracker({"a": Objective(0.2, 0.0), "b": Objective(0.2, 0.0)})
    slo.observe("a", T, ttft=1.0, tpot=None)
    slo.observe("b", T, ttft=0.1, tpot=None)
    assert slo.breached("a", T)
    assert not slo.breached("b", T)
