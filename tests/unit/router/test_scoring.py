"""A replica's load as one number: in flight, queued and KV use against the operator's
targets, a stale replica scored as at target instead of by figures it no longer
vouches for, and the sum divided by the replica's weight. The clock is passed in."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmgw.engines.load import EngineLoad
from llmgw.router.breaker import Breaker
from llmgw.router.endpoints import Endpoint, EndpointSpec
from llmgw.router.scoring import ScoringTargets, kv_term, load_score
from llmgw.upstream import UpstreamClient

NOW = 1000.0
TARGETS = ScoringTargets(
    target_waiting=8.0, target_inflight=4.0, kv_ceiling=0.8, session_load_factor=1.5, stale_after=10.0
)
_CLIENT = UpstreamClient()


def endpoint(
    *,
    inflight: int = 0,
    load: EngineLoad | None = None,
    scraped_at: float | None = NOW,
    weight: float = 1.0,
) -> Endpoint:
    spec = EndpointSpec(id="r1", url="http://10.0.0.1:8000/v1", models=("chat",), weight=weight)
    e = Endpoint(spec, _CLIENT.pool_for(spec.url), Breaker(3, 10.0))
    e.inflight = inflight
    e.load = load if load is not None else EngineLoad(waiting=0.0, running=0.0, kv_usage=0.0)
    e.scraped_at = scraped_at
    return e


# --- the KV term ------------------------------------------------------------------------------

KV_CASES = [
    pytest.param(0.0, 0.8, 0.0, id="empty"),
    pytest.param(0.4, 0.8, 0.5, id="half-way-to-the-ceiling"),
    pytest.param(0.8, 0.8, 1.0, id="at-the-ceiling-is-one"),
    pytest.param(0.9, 0.8, 1.0 + 4.0 * 0.1 / 0.2, id="half-way-past-the-ceiling"),
    pytest.param(1.0, 0.8, 5.0, id="full-past-the-ceiling"),
    pytest.param(0.5, 1.0, 0.5, id="ceiling-at-one-is-linear"),
    pytest.param(0.7, 0.0, 0.0, id="no-ceiling-no-kv-term"),
    pytest.param(0.7, -1.0, 0.0, id="negative-ceiling-no-kv-term"),
]


@pytest.mark.parametrize(("kv", "ceiling", "term"), KV_CASES)
def test_kv_term(kv: float, ceiling: float, term: float) -> None:
    assert kv_term(kv, ceiling) == pytest.approx(term)


@settings(max_examples=100, deadline=None, derandomize=True, database=None)
@given(
    ceiling=st.floats(min_value=0.05, max_value=0.99),
    a=st.floats(min_value=0.0, max_value=1.0),
    b=st.floats(min_value=0.0, max_value=1.0),
)
def test_kv_term_rises_with_use_and_is_one_at_the_ceiling(ceiling: float, a: float, b: float) -> None:
    low, high = sorted((a, b))
    assert kv_term(low, ceiling) <= kv_term(high, ceiling)
    assert kv_term(ceiling, ceiling) == pytest.approx(1.0)
    assert (kv_term(high, ceiling) > 1.0) is (high > ceiling)
    # A full cache costs the same wherever the ceiling is: one, plus the whole penalty.
    assert kv_term(1.0, ceiling) == pytest.approx(5.0)


def test_a_replica_past_the_kv_ceiling_loses_to_any_with_room() -> None:
    full = kv_term(0.95, 0.8)
    assert full > kv_term(0.8, 0.8) + 2.0


# --- the score --------------------------------------------------------------------------------

SCORE_CASES = [
    pytest.param({}, 0.0, id="idle"),
    pytest.param({"inflight": 2}, 0.5, id="in-flight-half-target"),
    pytest.param({"inflight": 4}, 1.0, id="in-flight-at-target"),
    pytest.param({"load": EngineLoad(waiting=4.0)}, 0.5, id="waiting-half-target"),
    pytest.param({"load": EngineLoad(kv_usage=0.4)}, 0.5, id="kv-half-ceiling"),
    pytest.param(
        {"inflight": 2, "load": EngineLoad(waiting=8.0, running=30.0, kv_usage=0.4)},
        0.5 + 1.0 + 0.5,
        id="three-signals-add-running-ignored",
    ),
    pytest.param(
        {"load": EngineLoad(waiting=None, running=3.0, kv_usage=None)}, 0.0, id="fresh-reported-nothing"
    ),
    pytest.param({"load": EngineLoad(waiting=2.0, kv_usage=None)}, 0.25, id="llamacpp-no-kv"),
    pytest.param({"scraped_at": None}, 1.0, id="never-scraped-is-at-target"),
    pytest.param({"scraped_at": None, "inflight": 2}, 1.5, id="never-scraped-in-flight-still-counts"),
    pytest.param(
        {"scraped_at": NOW - 10.0, "load": EngineLoad(waiting=4.0)}, 0.5, id="at-stale-after-is-fresh"
    ),
    pytest.param(
        {"scraped_at": NOW - 10.001, "load": EngineLoad(waiting=40.0, kv_usage=1.0)},
        1.0,
        id="stale-ignores-scraped-figures",
    ),
    pytest.param(
        {"scraped_at": NOW - 60.0, "load": EngineLoad(waiting=0.0, kv_usage=0.0)},
        1.0,
        id="stale-idle-figures-do-not-help-either",
    ),
    pytest.param({"inflight": 4, "weight": 2.0}, 0.5, id="weight-two-halves-the-score"),
    pytest.param({"inflight": 1, "weight": 0.5}, 0.5, id="weight-half-doubles-the-score"),
    pytest.param({"inflight": 2, "weight": 0.0}, 0.5, id="weight-zero-counts-as-one"),
    pytest.param({"inflight": 2, "weight": -3.0}, 0.5, id="negative-weight-counts-as-one"),
    pytest.param({"scraped_at": None, "weight": 4.0}, 0.25, id="stale-penalty-divided-by-weight"),
]


@pytest.mark.parametrize(("state", "score"), SCORE_CASES)
def test_load_score(state: dict[str, Any], score: float) -> None:
    assert load_score(endpoint(**state), TARGETS, NOW) == pytest.approx(score)


TARGET_CASES = [
    pytest.param({}, 1.0 + 0.5 + 0.5, id="as-set"),
    pytest.param({"target_inflight": 0.0}, 0.5 + 0.5, id="no-inflight-target-ignores-in-flight"),
    pytest.param({"target_waiting": 0.0}, 1.0 + 0.5, id="no-waiting-target-ignores-the-queue"),
    pytest.param({"kv_ceiling": 0.0}, 1.0 + 0.5, id="no-kv-ceiling-ignores-kv"),
    pytest.param({"target_inflight": 8.0}, 0.5 + 0.5 + 0.5, id="higher-inflight-target-lower-score"),
    pytest.param({"target_waiting": 2.0}, 1.0 + 2.0 + 0.5, id="lower-waiting-target-higher-score"),
    pytest.param({"kv_ceiling": 0.4}, 1.0 + 0.5 + 1.0, id="kv-at-a-lower-ceiling"),
]


@pytest.mark.parametrize(("change", "score"), TARGET_CASES)
def test_each_target_normalises_its_own_signal(change: dict[str, float], score: float) -> None:
    # 4 in flight, 4 waiting, KV at 0.4: 1.0 + 0.5 + 0.5 against the default targets.
    e = endpoint(inflight=4, load=EngineLoad(waiting=4.0, kv_usage=0.4))
    targets = ScoringTargets(
        **{
            "target_waiting": 8.0,
            "target_inflight": 4.0,
            "kv_ceiling": 0.8,
            "session_load_factor": 1.5,
            "stale_after": 10.0,
            **change,
        }
    )
    assert load_score(e, targets, NOW) == pytest.approx(score)


def test_a_replica_goes_stale_as_the_clock_moves_on() -> None:
    e = endpoint(load=EngineLoad(waiting=2.0, kv_usage=0.0), scraped_at=NOW)
    assert load_score(e, TARGETS, NOW) == pytest.approx(0.25)
    assert load_score(e, TARGETS, NOW + 10.0) == pytest.approx(0.25)
    assert load_score(e, TARGETS, NOW + 10.5) == pytest.approx(1.0)


def test_in_flight_counts_between_scrapes() -> None:
    # The scraped figures lag; requests this gateway sent since show at once.
    e = endpoint(load=EngineLoad(waiting=0.0, kv_usage=0.0))
    before = load_score(e, TARGETS, NOW)
    e.inflight += 1
    assert load_score(e, TARGETS, NOW) == pytest.approx(before + 0.25)


_counts = st.integers(min_value=0, max_value=64)
_fractions = st.floats(min_value=0.0, max_value=1.0)


@settings(max_examples=100, deadline=None, derandomize=True, database=None)
@given(inflight=_counts, waiting=_counts, kv=_fractions, more=st.integers(min_value=1, max_value=8))
def test_more_load_never_scores_lower(inflight: int, waiting: int, kv: float, more: int) -> None:
    base = load_score(
        endpoint(inflight=inflight, load=EngineLoad(waiting=float(waiting), kv_usage=kv)), TARGETS, NOW
    )
    busier_flight = endpoint(inflight=inflight + more, load=EngineLoad(waiting=float(waiting), kv_usage=kv))
    busier_queue = endpoint(inflight=inflight, load=EngineLoad(waiting=float(waiting + more), kv_usage=kv))
    assert load_score(busier_flight, TARGETS, NOW) > base
    assert load_score(busier_queue, TARGETS, NOW) > base


@settings(max_examples=100, deadline=None, derandomize=True, database=None)
@given(inflight=_counts, waiting=_counts, kv=_fractions, weight=st.floats(min_value=0.25, max_value=8.0))
def test_the_score_is_inversely_proportional_to_weight(
    inflight: int, waiting: int, kv: float, weight: float
) -> None:
    load = EngineLoad(waiting=float(waiting), kv_usage=kv)
    unit = load_score(endpoint(inflight=inflight, load=load), TARGETS, NOW)
    weighted = load_score(endpoint(inflight=inflight, load=load, weight=weight), TARGETS, NOW)
    assert math.isclose(weighted * weight, unit, rel_tol=1e-9, abs_tol=1e-12)
