"""The signup throttle: a fixed window per key, with bounded memory."""

from __future__ import annotations

from llmgw.identity.throttle import Allowance, Throttle


def test_uses_beyond_the_allowance_are_refused_until_the_window_turns() -> None:
    throttle = Throttle(Allowance(count=2, window_s=60))
    assert [throttle.allow("a", t) for t in (0, 1, 2)] == [True, True, False]
    assert throttle.allow("b", 2) is True  # another key has its own window
    assert throttle.allow("a", 59.9) is False
    assert throttle.allow("a", 60) is True


def test_memory_is_bounded_by_forgetting_the_oldest_key() -> None:
    throttle = Throttle(Allowance(count=1, window_s=60), max_keys=100)
    for n in range(1000):
        throttle.allow(f"k{n}", 0)
    assert len(throttle) == 100
    assert throttle.allow("k999", 1) is False  # recent: remembered
    assert throttle.allow("k0", 1) is True  # forgotten: starts afresh
