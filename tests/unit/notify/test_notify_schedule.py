"""When a failed delivery is tried again: exponential, jittered, capped, bounded; and
what that means for a receiver down for 5 minutes (the issue's figure)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from llmgw.notify.schedule import RetrySchedule

SCHEDULE = RetrySchedule()


def _draws(*values: float) -> Callable[[], float]:
    stream: Iterator[float] = iter(values)
    return lambda: next(stream)


def _constant(value: float) -> Callable[[], float]:
    return lambda: value


def test_the_wait_doubles_from_base_to_cap() -> None:
    highest = [SCHEDULE.delay(n, draw=0.999999) for n in range(1, 10)]
    assert highest == pytest.approx([5, 10, 20, 40, 80, 160, 300, 300, 300], rel=1e-5)


def test_jitter_keeps_the_wait_between_half_and_all_of_its_ceiling() -> None:
    assert SCHEDULE.delay(3, draw=0.0) == 10.0
    assert SCHEDULE.delay(3, draw=0.5) == 15.0
    assert SCHEDULE.delay(30, draw=0.0) == 150.0


def test_nothing_is_tried_past_the_hour_after_the_first_attempt() -> None:
    assert SCHEDULE.next_at(first_at=0.0, attempts=20, now=3400.0, draw=0.0) == 3550.0
    assert SCHEDULE.next_at(first_at=0.0, attempts=20, now=3500.0, draw=0.0) is None


def test_a_receiver_down_for_5_minutes_gets_its_event_within_5_minutes_of_coming_back() -> None:
    # Whatever the draws: the worst (every wait its ceiling) and the best (half of it).
    for draw in (0.0, 0.5, 0.999999):
        after = SCHEDULE.first_try_after(300.0, _constant(draw))
        assert after is not None
        assert 0.0 < after <= SCHEDULE.cap_s
    attempts = SCHEDULE.attempts_until(0.0, 300.0, _constant(0.999999))
    # 0, 5, 15, 35, 75, 155, 315: six failed tries while down, the seventh delivers.
    assert [round(t) for t in attempts] == [0, 5, 15, 35, 75, 155, 315]


def test_a_receiver_down_for_more_than_the_hour_loses_the_event() -> None:
    assert SCHEDULE.first_try_after(3700.0, _draws(*[0.0] * 100)) is None


def test_a_shorter_schedule_for_tests_keeps_the_shape() -> None:
    quick = RetrySchedule(base_s=0.2, cap_s=1.0, give_up_s=30.0)
    assert [quick.delay(n, 0.999999) for n in (1, 2, 3, 4)] == pytest.approx([0.2, 0.4, 0.8, 1.0], rel=1e-5)
