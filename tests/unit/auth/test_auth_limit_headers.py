"""The x-ratelimit-* headers of an answered request, read off the caller's `Meter` as
admission left it: the limit, what is left (exact for one gateway), and when the
window is empty again."""

from __future__ import annotations

from llmgw.auth.limiter import LimitRule, Meter, SharedCounters

NOW = 1_800_000_010.0  # ten seconds into a minute


def test_headers_follow_what_admission_counted() -> None:
    counters = SharedCounters()
    meter = Meter(LimitRule("project:p", 5, "project"), LimitRule("project:p", 1000, "project"))
    for _ in range(2):
        assert counters.take(meter, 100, NOW)
    assert dict(meter.headers(NOW + 1)) == {
        "x-ratelimit-limit-requests": "5",
        "x-ratelimit-remaining-requests": "3",
        "x-ratelimit-reset-requests": "1m49s",  # the minute after this one ends then
        "x-ratelimit-limit-tokens": "1000",
        "x-ratelimit-remaining-tokens": "800",
        "x-ratelimit-reset-tokens": "1m49s",
    }
    # A correction of the estimate (the answer's real count) is seen at the next judgement.
    counters.add("project:p", 0, -50, NOW + 2)
    assert counters.take(meter, 100, NOW + 2)
    headers = dict(meter.headers(NOW + 2))
    assert (headers["x-ratelimit-remaining-requests"], headers["x-ratelimit-remaining-tokens"]) == (
        "2",
        "750",
    )


def test_only_the_limits_that_apply_have_headers() -> None:
    counters = SharedCounters()
    meter = Meter(LimitRule("key:k", 60, "key"), None)
    assert counters.take(meter, 10, NOW)
    assert [name for name, _ in meter.headers(NOW)] == [
        "x-ratelimit-limit-requests",
        "x-ratelimit-remaining-requests",
        "x-ratelimit-reset-requests",
    ]
    assert Meter(None, None).headers(NOW) == []


def test_the_reset_is_written_anew_as_the_seconds_pass() -> None:
    counters = SharedCounters()
    meter = Meter(LimitRule("key:k", 60, "key"), None)
    assert counters.take(meter, 10, NOW)

    def reset(at: float) -> str:
        return dict(meter.headers(at))["x-ratelimit-reset-requests"]

    assert [reset(NOW + 1), reset(NOW + 1.5), reset(NOW + 2), reset(NOW + 1.2), reset(NOW + 109.5)] == [
        "1m49s",
        "1m49s",
        "1m48s",
        "1m49s",
        "500ms",
    ]
