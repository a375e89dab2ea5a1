"""The failure lines: one per failed try, naming the request, the replica, the phase
(with the setting, for a timeout), the reason and the attempt; INFO when another try
follows, WARNING when the request failed or its stream was cut; at most a bucketful,
with the lines left out counted in the next one."""

from __future__ import annotations

import logging

import pytest

from llmgw.errors import (
    DialError,
    FirstTokenTimeout,
    GenerationTimeout,
    HeaderTimeout,
    IdleTimeout,
    UpstreamClosed,
    UpstreamError,
    UpstreamStatus,
)
from llmgw.router.failure_log import FailureLog, phase_of, refill

LOGGER = "llmgw.router.failure_log"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("error", "phase"),
    [
        (DialError("refused"), "dial"),
        (HeaderTimeout(60), "router.timeouts.response_header"),
        (GenerationTimeout(60), "router.timeouts.generation"),
        (FirstTokenTimeout(60), "router.timeouts.first_token"),
        (IdleTimeout(60), "router.timeouts.idle"),
        (UpstreamStatus(500, b""), "response status"),
        (UpstreamClosed("closed early"), "response"),
    ],
)
def test_the_phase_names_where_the_try_failed(error: UpstreamError, phase: str) -> None:
    assert phase in phase_of(error)


def test_a_retried_failure_is_info_and_the_final_one_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    failures = FailureLog(clock=Clock())
    with caplog.at_level(logging.INFO, logger=LOGGER):
        assert failures.failed("req-1", "r-a", "chat", 1, 3, UpstreamStatus(500, b""), final=False)
        assert failures.failed("req-1", "r-b", "chat", 2, 3, HeaderTimeout(60), final=True)
    first, second = caplog.records
    assert first.levelno == logging.INFO
    for text in ("req-1", "r-a", "'chat'", "attempt 1 of 3", "the replica answered 500", "trying another"):
        assert text in first.getMessage()
    assert second.levelno == logging.WARNING
    for text in ("req-1", "r-b", "attempt 2 of 3", "router.timeouts.response_header", "the request failed"):
        assert text in second.getMessage()


def test_a_cut_stream_says_so_instead_of_an_attempt(caplog: pytest.LogCaptureFixture) -> None:
    failures = FailureLog(clock=Clock())
    with caplog.at_level(logging.INFO, logger=LOGGER):
        failures.failed("req-2", "r-a", "chat", 1, 1, IdleTimeout(60), final=True, cut=True)
    (record,) = caplog.records
    assert record.levelno == logging.WARNING
    assert "after its stream began" in record.getMessage()
    assert "the stream was cut off" in record.getMessage()
    assert "attempt" not in record.getMessage()


def test_a_storm_is_bounded_and_the_lines_left_out_are_counted(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    failures = FailureLog(rate_per_s=2.0, burst=3, clock=clock)
    error = DialError("refused")
    with caplog.at_level(logging.INFO, logger=LOGGER):
        written = [failures.failed(f"req-{n}", "r", "m", 1, 1, error, final=True) for n in range(10)]
        assert written == [True] * 3 + [False] * 7
        assert failures.suppressed == 7
        clock.now += 0.5  # one line's worth of refill
        assert failures.failed("req-x", "r", "m", 1, 1, error, final=True)
        assert not failures.failed("req-y", "r", "m", 1, 1, error, final=True)
    assert len(caplog.records) == 4
    assert "(7 similar lines left out before this one)" in caplog.records[-1].getMessage()
    assert failures.suppressed == 1


def test_a_level_that_is_off_costs_no_token(caplog: pytest.LogCaptureFixture) -> None:
    failures = FailureLog(rate_per_s=1.0, burst=1, clock=Clock())
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert not failures.failed("req", "r", "m", 1, 2, DialError("x"), final=False)
        assert failures.failed("req", "r", "m", 2, 2, DialError("x"), final=True)
    assert failures.suppressed == 0


@pytest.mark.parametrize(
    ("tokens", "elapsed", "expected"),
    [(0.0, 1.0, 5.0), (0.0, 100.0, 50.0), (10.0, -3.0, 10.0), (49.5, 1.0, 50.0)],
)
def test_the_bucket_refills_at_its_rate_up_to_its_burst(
    tokens: float, elapsed: float, expected: float
) -> None:
    assert refill(tokens, elapsed, 5.0, 50) == expected
