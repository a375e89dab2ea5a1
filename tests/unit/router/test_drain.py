"""The drain estimate of one queue: releases per busy second, decayed together, so that
idle spells change nothing, a stuck queue reads as stuck, and the newcomer's wait grows
with the waiters ahead of it."""

from __future__ import annotations

import math

import pytest

from llmgw.router.drain import DrainMeter, expected_wait_s, would_outwait


def _draining(rate_per_s: float, seconds: float, tau_s: float = 10.0, step_s: float = 0.01) -> DrainMeter:
    """A meter fed a queue that always had waiters and released `rate_per_s`."""
    meter = DrainMeter(tau_s)
    now = 0.0
    meter.advance(now, False)
    owed = 0.0
    for _ in range(round(seconds / step_s)):
        now += step_s
        meter.advance(now, True)
        owed += rate_per_s * step_s
        while owed >= 1.0:
            meter.release()
            owed -= 1.0
    return meter


def test_a_meter_with_no_history_gives_no_estimate() -> None:
    meter = DrainMeter(10.0)
    assert expected_wait_s(meter, 50) is None
    meter.advance(5.0, True)  # the first call only sets the time
    assert expected_wait_s(meter, 50) is None
    assert would_outwait(meter, 50, 1.0) is None


@pytest.mark.parametrize("rate", [2.0, 10.0, 50.0])
def test_the_wait_is_the_waiters_ahead_over_the_release_rate(rate: float) -> None:
    meter = _draining(rate, 60.0)
    wait = expected_wait_s(meter, 19)
    assert wait is not None
    assert wait == pytest.approx(20 / rate, rel=0.05)


def test_an_idle_spell_changes_neither_the_rate_nor_the_evidence() -> None:
    meter = _draining(10.0, 30.0)
    before = expected_wait_s(meter, 9)
    assert before is not None
    meter.advance(meter.at + 5.0 if meter.at is not None else 5.0, False)
    after = expected_wait_s(meter, 9)
    assert after is not None
    assert after == pytest.approx(before, rel=1e-9)


def test_a_queue_that_releases_nothing_reads_as_one_release_per_busy_time() -> None:
    meter = DrainMeter(3.0)
    meter.advance(0.0, False)
    meter.advance(6.0, True)
    busy = 3.0 * (1 - math.exp(-2.0))
    assert meter.busy_s == pytest.approx(busy)
    assert expected_wait_s(meter, 4) == pytest.approx(5 * busy)


def test_a_request_that_would_outwait_the_ttl_is_told_so_and_one_that_would_not_is_not() -> None:
    meter = _draining(2.0, 60.0)  # about 0.5 s a release
    assert would_outwait(meter, 9, 10.0) is None  # 5 s
    expected = would_outwait(meter, 39, 10.0)  # 20 s
    assert expected is not None
    assert expected == pytest.approx(20.0, rel=0.05)


def test_time_that_does_not_advance_changes_nothing() -> None:
    meter = _draining(5.0, 10.0)
    snapshot = (meter.released, meter.busy_s, meter.at)
    assert meter.at is not None
    meter.advance(meter.at, True)
    meter.advance(meter.at - 1.0, True)
    assert (meter.released, meter.busy_s) == snapshot[:2]
