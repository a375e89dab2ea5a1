"""The load guards: when replicas are too unevenly loaded for prefix affinity, and how
far a session's replica may fall behind before the session moves."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmgw.router.balance import imbalanced, session_holds

# balance_abs 32, balance_rel 1.5 are SGLang's defaults.
IMBALANCE_CASES = [
    pytest.param([], False, id="no-replicas"),
    pytest.param([100.0], False, id="one-replica"),
    pytest.param([5.0, 5.0, 5.0], False, id="even"),
    pytest.param([0.0, 40.0], True, id="both-guards-exceeded"),
    pytest.param([0.0, 32.0], False, id="absolute-gap-exactly-at-the-bound"),
    pytest.param([0.0, 32.5], True, id="absolute-gap-just-over"),
    pytest.param([100.0, 140.0], False, id="absolute-only-busy-replicas"),
    pytest.param([1.0, 10.0], False, id="relative-only-idle-replicas"),
    pytest.param([80.0, 120.0], False, id="relative-exactly-at-the-bound"),
    pytest.param([80.0, 120.5], True, id="relative-just-over"),
    pytest.param([3.0, 50.0, 20.0, 10.0], True, id="extremes-anywhere-in-the-list"),
]


@pytest.mark.parametrize(("loads", "expected"), IMBALANCE_CASES)
def test_imbalanced(loads: list[float], expected: bool) -> None:
    assert imbalanced(loads, balance_abs=32.0, balance_rel=1.5) is expected


HOLD_CASES = [
    pytest.param(3.0, 3.0, 1.5, True, id="already-the-best"),
    pytest.param(15.0, 10.0, 1.5, True, id="at-the-factor"),
    pytest.param(15.5, 10.0, 1.5, False, id="past-the-factor"),
    pytest.param(0.0, 0.0, 2.0, True, id="both-idle"),
    pytest.param(2.0, 0.0, 2.0, True, id="best-idle-floored-at-one"),
    pytest.param(3.0, 0.0, 2.0, False, id="best-idle-past-the-floor"),
    pytest.param(1.0, 0.5, 1.5, True, id="fractional-best-floored-at-one"),
    pytest.param(4.0, 4.0, 0.5, True, id="factor-below-one-still-holds-the-best"),
    pytest.param(5.0, 4.0, 0.5, False, id="factor-below-one-otherwise-never"),
]


@pytest.mark.parametrize(("current", "best", "factor", "expected"), HOLD_CASES)
def test_session_holds(current: float, best: float, factor: float, expected: bool) -> None:
    assert session_holds(current, best, factor) is expected


_load = st.floats(0, 1000, allow_nan=False)


@given(loads=st.lists(_load, max_size=8), seed=st.randoms(use_true_random=False))
def test_imbalance_ignores_the_order_of_replicas(loads: list[float], seed: random.Random) -> None:
    shuffled = list(loads)
    seed.shuffle(shuffled)
    assert imbalanced(loads, 32.0, 1.5) == imbalanced(shuffled, 32.0, 1.5)


@given(load=_load, count=st.integers(0, 8))
def test_equal_loads_are_never_imbalanced(load: float, count: int) -> None:
    assert not imbalanced([load] * count, 0.0, 1.0)


@given(loads=st.lists(_load, min_size=2, max_size=8))
def test_imbalance_needs_both_guards(loads: list[float]) -> None:
    gap = max(loads) - min(loads)
    assert imbalanced(loads, balance_abs=gap, balance_rel=0.0) is False
    assert imbalanced(loads, balance_abs=0.0, balance_rel=1e12) is (max(loads) > min(loads) * 1e12)


@given(current=_load, best=_load, factor=st.floats(1.0, 10.0))
def test_holding_is_monotone_in_load(current: float, best: float, factor: float) -> None:
    if session_holds(current, best, factor):
        assert session_holds(current * 0.5, best, factor)
        assert session_holds(current, best * 2, factor)
    if current <= best:
        assert session_holds(current, best, factor)
