"""The session affinity table: lookups, ttl, least-recently-used bound, withdrawal."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmgw.router.affinity import SessionAffinity


def test_an_unknown_session_has_no_endpoint() -> None:
    assert SessionAffinity(max_sessions=10, ttl=60.0).get("s", now=0.0) is None


def test_a_session_goes_where_it_was_last_sent() -> None:
    table = SessionAffinity(max_sessions=10, ttl=60.0)
    table.set("s", "a", now=0.0)
    table.set("s", "b", now=1.0)
    assert table.get("s", now=2.0) == "b"
    assert len(table) == 1


@pytest.mark.parametrize(("now", "expected"), [(159.99, "a"), (160.0, None), (500.0, None)])
def test_an_entry_unused_for_the_ttl_is_a_miss(now: float, expected: str | None) -> None:
    table = SessionAffinity(max_sessions=10, ttl=60.0)
    table.set("s", "a", now=100.0)
    assert table.get("s", now=now) == expected


def test_an_expired_entry_is_dropped_when_seen() -> None:
    table = SessionAffinity(max_sessions=10, ttl=60.0)
    table.set("s", "a", now=0.0)
    assert table.get("s", now=60.0) is None
    assert len(table) == 0


def test_get_does_not_renew_a_session() -> None:
    table = SessionAffinity(max_sessions=10, ttl=60.0)
    table.set("s", "a", now=0.0)
    assert table.get("s", now=59.0) == "a"
    assert table.get("s", now=61.0) is None


def test_set_renews_a_session() -> None:
    table = SessionAffinity(max_sessions=10, ttl=60.0)
    table.set("s", "a", now=0.0)
    table.set("s", "a", now=50.0)
    assert table.get("s", now=100.0) == "a"


def test_the_least_recently_set_session_goes_first() -> None:
    table = SessionAffinity(max_sessions=2, ttl=60.0)
    table.set("s1", "a", now=0.0)
    table.set("s2", "a", now=1.0)
    table.set("s1", "b", now=2.0)  # s1 is now the most recent
    table.set("s3", "a", now=3.0)
    assert len(table) == 2
    assert table.get("s2", now=3.0) is None
    assert table.get("s1", now=3.0) == "b"
    assert table.get("s3", now=3.0) == "a"


def test_set_sweeps_expired_sessions_from_the_old_end() -> None:
    table = SessionAffinity(max_sessions=10, ttl=60.0)
    table.set("s1", "a", now=0.0)
    table.set("s2", "a", now=10.0)
    table.set("s3", "a", now=65.0)
    assert len(table) == 2  # s1 gone, s2 still live
    assert table.get("s2", now=65.0) == "a"


def test_forget_endpoint_drops_only_its_sessions() -> None:
    table = SessionAffinity(max_sessions=10, ttl=60.0)
    table.set("s1", "a", now=0.0)
    table.set("s2", "b", now=0.0)
    table.set("s3", "a", now=0.0)
    table.forget_endpoint("a")
    assert table.get("s1", now=1.0) is None
    assert table.get("s3", now=1.0) is None
    assert table.get("s2", now=1.0) == "b"
    assert len(table) == 1


@pytest.mark.parametrize(("max_sessions", "ttl"), [(0, 1.0), (1, 0.0), (1, float("nan"))])
def test_bad_bounds_are_refused(max_sessions: int, ttl: float) -> None:
    with pytest.raises(ValueError, match="SessionAffinity"):
        SessionAffinity(max_sessions=max_sessions, ttl=ttl)


_sessions = st.sampled_from(["s1", "s2", "s3", "s4", "s5"])
_endpoints = st.sampled_from(["a", "b", "c"])
_op = st.one_of(
    st.tuples(st.just("set"), _sessions, _endpoints, st.floats(0, 4)),
    st.tuples(st.just("get"), _sessions, st.floats(0, 4)),
    st.tuples(st.just("forget"), _endpoints),
)


@settings(max_examples=200, deadline=None)
@given(max_sessions=st.integers(1, 4), ops=st.lists(_op, max_size=40))
def test_answers_like_a_list_of_the_most_recent_sessions(
    max_sessions: int, ops: list[tuple[Any, ...]]
) -> None:
    ttl = 6.0
    table = SessionAffinity(max_sessions=max_sessions, ttl=ttl)
    recent: list[tuple[str, str, float]] = []  # oldest first
    now = 0.0
    for op in ops:
        if op[0] == "set":
            now += op[3]
            table.set(op[1], op[2], now)
            recent = [r for r in recent if r[0] != op[1]] + [(op[1], op[2], now)]
            recent = recent[-max_sessions:]
        elif op[0] == "get":
            now += op[2]
            expected = next((e for s, e, at in recent if s == op[1] and at > now - ttl), None)
            assert table.get(op[1], now) == expected
        else:
            table.forget_endpoint(op[1])
            recent = [r for r in recent if r[1] != op[1]]
        assert len(table) <= max_sessions
