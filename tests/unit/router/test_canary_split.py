"""The canary split: the share it promises, evenly, and a session kept on one side."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from llmgw.router.canary_split import to_candidate


def test_ten_percent_of_ten_thousand_requests() -> None:
    sent = sum(to_candidate(10, n, None) for n in range(1, 10_001))
    assert 900 <= sent <= 1_100  # 10 % ± 1 point


def test_ten_percent_of_ten_thousand_sessions() -> None:
    sent = sum(to_candidate(10, n, f"session-{n}") for n in range(1, 10_001))
    assert 900 <= sent <= 1_100  # 10 % ± 1 point


@given(st.integers(0, 100), st.integers(1, 10**9))
def test_every_hundred_consecutive_requests_hold_exactly_percent(percent: int, start: int) -> None:
    assert sum(to_candidate(percent, n, None) for n in range(start, start + 100)) == percent


@given(st.integers(0, 100), st.text(min_size=1, max_size=64), st.integers(1, 10**6), st.integers(1, 10**6))
def test_a_session_stays_on_its_side(percent: int, session: str, one: int, other: int) -> None:
    assert to_candidate(percent, one, session) == to_candidate(percent, other, session)


@given(st.text(min_size=1, max_size=64), st.integers(0, 99))
def test_a_session_on_the_candidate_stays_there_as_the_share_grows(session: str, percent: int) -> None:
    if to_candidate(percent, 1, session):
        assert to_candidate(percent + 1, 1, session)


@given(st.integers(1, 10**6), st.one_of(st.none(), st.text(min_size=1)))
def test_zero_sends_none_and_a_hundred_sends_all(sequence: int, session: str | None) -> None:
    assert not to_candidate(0, sequence, session)
    assert to_candidate(100, sequence, session)


def test_the_split_is_spread_not_bunched() -> None:
    picks = [n for n in range(1, 101) if to_candidate(10, n, None)]
    assert [b - a for a, b in itertools.pairwise(picks)] == [10] * 9
