"""The per-endpoint circuit breaker: closed, open, half-open with one probe, and a probe
that never reports."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmgw.router.breaker import Breaker

# Each step: (event, now), then the state and availability expected right after it.
# threshold 3, cooldown 10.
SCENARIOS = [
    pytest.param(
        [("fail", 0.0), ("fail", 1.0)],
        "closed",
        True,
        id="below-threshold-stays-closed",
    ),
    pytest.param(
        [("fail", 0.0), ("fail", 1.0), ("fail", 2.0)],
        "open",
        False,
        id="threshold-opens",
    ),
    pytest.param(
        [("fail", 0.0), ("fail", 1.0), ("success", 1.5), ("fail", 2.0), ("fail", 3.0)],
        "closed",
        True,
        id="a-success-resets-the-count",
    ),
    pytest.param(
        [("fail", 0.0), ("fail", 1.0), ("fail", 2.0), ("look", 11.99)],
        "open",
        False,
        id="open-for-the-whole-cooldown",
    ),
    pytest.param(
        [("fail", 0.0), ("fail", 1.0), ("fail", 2.0), ("look", 12.0)],
        "half_open",
        True,
        id="half-open-after-the-cooldown",
    ),
    pytest.param(
        [("fail", 0.0), ("fail", 1.0), ("fail", 2.0), ("begin", 12.0)],
        "half_open",
        False,
        id="one-probe-at-a-time",
    ),
    pytest.param(
        [("fail", 0.0), ("fail", 1.0), ("fail", 2.0), ("begin", 12.0), ("success", 13.0)],
        "closed",
        True,
        id="probe-success-closes",
    ),
    pytest.param(
        [("fail", 0.0), ("fail", 1.0), ("fail", 2.0), ("begin", 12.0), ("fail", 13.0), ("look", 22.99)],
        "open",
        False,
        id="probe-failure-reopens-for-a-full-cooldown",
    ),
    pytest.param(
        [("fail", 0.0), ("fail", 1.0), ("fail", 2.0), ("begin", 12.0), ("fail", 13.0), ("look", 23.0)],
        "half_open",
        True,
        id="then-half-open-again",
    ),
    pytest.param(
        [("fail", 0.0), ("fail", 1.0), ("fail", 2.0), ("begin", 12.0), ("abandon", 13.0)],
        "half_open",
        True,
        id="an-abandoned-probe-frees-the-slot",
    ),
    pytest.param(
        [("fail", 0.0), ("fail", 1.0), ("fail", 2.0), ("begin", 12.0), ("look", 21.99)],
        "half_open",
        False,
        id="a-silent-probe-holds-the-slot-for-a-cooldown",
    ),
    pytest.param(
        [("fail", 0.0), ("fail", 1.0), ("fail", 2.0), ("begin", 12.0), ("look", 22.0)],
        "half_open",
        True,
        id="then-the-slot-is-free-again",
    ),
    pytest.param(
        [("fail", 0.0), ("fail", 1.0), ("fail", 2.0), ("success", 3.0)],
        "open",
        False,
        id="a-late-success-does-not-close",
    ),
    pytest.param(
        [("fail", 0.0), ("fail", 1.0), ("fail", 2.0), ("fail", 9.0), ("look", 12.0)],
        "half_open",
        True,
        id="a-late-failure-does-not-extend-the-cooldown",
    ),
    pytest.param(
        [("fail", 0.0), ("fail", 1.0), ("fail", 2.0), ("look", 12.0), ("success", 12.5)],
        "half_open",
        True,
        id="a-success-with-no-probe-out-does-not-close",
    ),
]


@pytest.mark.parametrize(("steps", "state", "available"), SCENARIOS)
def test_breaker_scenarios(steps: list[tuple[str, float]], state: str, available: bool) -> None:
    breaker = Breaker(failure_threshold=3, cooldown=10.0)
    for event, now in steps:
        if event == "fail":
            breaker.failed(now)
        elif event == "success":
            breaker.succeeded()
        elif event == "begin":
            assert breaker.available(now)
            breaker.begin(now)
        elif event == "abandon":
            breaker.abandoned(now)
    last = steps[-1][1]
    assert breaker.state(last) == state
    assert breaker.available(last) is available


def test_consecutive_failures_counts_until_a_success() -> None:
    breaker = Breaker(failure_threshold=2, cooldown=5.0)
    assert breaker.consecutive_failures == 0
    breaker.failed(0.0)
    breaker.failed(0.0)
    breaker.failed(1.0)
    assert breaker.consecutive_failures == 3
    breaker.begin(5.0)
    breaker.succeeded()
    assert breaker.consecutive_failures == 0


def test_threshold_one_is_a_plain_cooldown() -> None:
    breaker = Breaker(failure_threshold=1, cooldown=30.0)
    breaker.failed(100.0)
    assert breaker.state(100.0) == "open"
    assert not breaker.available(129.9)
    assert breaker.available(130.0)


def test_begin_while_closed_leaves_nothing_to_release() -> None:
    breaker = Breaker(failure_threshold=1, cooldown=10.0)
    breaker.begin(0.0)
    breaker.failed(1.0)
    assert breaker.state(11.0) == "half_open"
    assert breaker.available(11.0)  # the request begun while closed is not a probe


def test_zero_cooldown_never_withholds_the_endpoint() -> None:
    breaker = Breaker(failure_threshold=1, cooldown=0.0)
    breaker.failed(1.0)
    breaker.begin(1.0)
    assert breaker.available(1.0)


@pytest.mark.parametrize(("threshold", "cooldown"), [(0, 1.0), (1, -1.0), (1, float("nan"))])
def test_bad_settings_are_refused(threshold: int, cooldown: float) -> None:
    with pytest.raises(ValueError, match="Breaker"):
        Breaker(failure_threshold=threshold, cooldown=cooldown)


_event = st.tuples(st.sampled_from(["fail", "success", "begin", "abandon"]), st.floats(0, 8))


@settings(max_examples=200, deadline=None)
@given(threshold=st.integers(1, 4), events=st.lists(_event, max_size=40))
def test_state_and_availability_agree_and_nothing_wedges(
    threshold: int, events: list[tuple[str, float]]
) -> None:
    cooldown = 5.0
    breaker = Breaker(failure_threshold=threshold, cooldown=cooldown)
    now = 0.0
    streak = 0
    for event, step in events:
        now += step
        was_closed = breaker.state(now) == "closed"
        if event == "fail":
            breaker.failed(now)
            streak += 1
            if was_closed and streak >= threshold:
                assert breaker.state(now) == "open"
        elif event == "success":
            breaker.succeeded()
            if breaker.state(now) == "closed":
                streak = 0
        elif event == "begin" and breaker.available(now):
            half_open = breaker.state(now) == "half_open"
            breaker.begin(now)
            if half_open:
                assert not breaker.available(now)  # exactly one probe
        elif event == "abandon":
            breaker.abandoned(now)
        state = breaker.state(now)
        if state == "closed":
            assert breaker.available(now)
            assert breaker.consecutive_failures < threshold
        if state == "open":
            assert not breaker.available(now)
        # Whatever happened, a cooldown later a request may go: nothing wedges it.
        assert breaker.available(now + cooldown)


def test_trip_opens_at_once_whatever_the_threshold() -> None:
    breaker = Breaker(failure_threshold=5, cooldown=10.0)
    breaker.trip(now=100.0)
    assert breaker.state(100.0) == "open"
    assert not breaker.available(105.0)
    assert breaker.available(110.0)  # after the cooldown, one probe decides as usual
    breaker.begin(110.0)
    breaker.succeeded()
    assert breaker.state(111.0) == "closed"
