"""Retry pacing for a failing model: doubling from base to max, cleared by success."""

from __future__ import annotations

from llmgw.control.decisions.backoff import Backoff


def test_each_failure_in_a_row_doubles_the_wait_up_to_the_maximum() -> None:
    backoff = Backoff(base_s=10, max_s=60)
    waits = []
    now = 1000.0
    for _ in range(5):
        until = backoff.failed("m", now)
        waits.append(until - now)
        now = until
    assert waits == [10, 20, 40, 60, 60]


def test_a_model_is_held_until_its_wait_is_over_and_others_are_not_held() -> None:
    backoff = Backoff(base_s=10, max_s=60)
    backoff.failed("m", 1000.0)
    assert backoff.holds("m", 1009.9)
    assert not backoff.holds("m", 1010.0)
    assert not backoff.holds("other", 1000.0)


def test_success_forgets_the_failures() -> None:
    backoff = Backoff(base_s=10, max_s=60)
    backoff.failed("m", 0.0)
    backoff.failed("m", 0.0)
    backoff.succeeded("m")
    assert not backoff.holds("m", 0.0)
    assert backoff.failed("m", 0.0) == 10.0
