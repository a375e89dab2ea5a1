"""Admission for a model whose replicas preempt by priority, as pure functions: a band is
judged against the work it cannot preempt, and the engine is sent the band's priority."""

from __future__ import annotations

import math

import pytest
from flow_rig import BANDS, BRONZE, GOLD, PLATINUM, SILVER

from llmgw.engines.load import EngineLoad
from llmgw.router.admission import (
    BandRule,
    engine_priority,
    may_admit,
    preemptive,
    priority_saturation,
    saturation,
    unpreemptable,
)
from llmgw.router.breaker import Breaker
from llmgw.router.endpoints import Endpoint, EndpointSpec
from llmgw.router.scoring import ScoringTargets
from llmgw.upstream import UpstreamClient

NOW = 1000.0
TARGETS = ScoringTargets(
    target_waiting=4.0, target_inflight=10.0, kv_ceiling=0.8, session_load_factor=1.25, stale_after=10.0
)
_CLIENT = UpstreamClient()


def replica(eid: str, *, priority_scheduling: bool, inflight: int = 0, weight: float = 1.0) -> Endpoint:
    spec = EndpointSpec(
        id=eid,
        url=f"http://10.0.0.1:{8000 + len(eid)}",
        models=("m",),
        weight=weight,
        priority_scheduling=priority_scheduling,
    )
    e = Endpoint(spec, _CLIENT.pool_for(spec.url), Breaker(3, 10.0))
    e.inflight = inflight
    # Preempted lower-band work queues in the engine and holds KV: both readings high.
    e.load = EngineLoad(waiting=40.0, running=10.0, kv_usage=0.99)
    e.scraped_at = NOW
    return e


def test_a_model_preempts_only_when_every_replica_does() -> None:
    yes, no = replica("a", priority_scheduling=True), replica("b", priority_scheduling=False)
    assert preemptive([yes, replica("c", priority_scheduling=True)])
    assert not preemptive([yes, no])
    assert not preemptive([])


def test_a_band_cannot_preempt_its_own_band_or_those_above() -> None:
    inflight = {"platinum": 1, "gold": 8, "silver": 2, "bronze": 5}
    assert unpreemptable(PLATINUM, BANDS, inflight) == 1
    assert unpreemptable(GOLD, BANDS, inflight) == 9
    assert unpreemptable(SILVER, BANDS, inflight) == 11
    assert unpreemptable(BRONZE, BANDS, inflight) == 16
    assert unpreemptable(GOLD, BANDS, {}) == 0


def test_platinum_goes_past_gold_that_fills_the_replicas() -> None:
    # Gold at its ceiling, on two replicas of target 10 each: 17 of 20 in flight.
    replicas = [replica(e, priority_scheduling=True, inflight=9 - i) for i, e in enumerate("ab")]
    inflight = {"gold": 17}
    assert not may_admit(GOLD, saturation(replicas, 0, TARGETS, NOW), held_back=False)
    level = priority_saturation(replicas, unpreemptable(PLATINUM, BANDS, inflight), TARGETS)
    assert level == 0.0
    assert may_admit(PLATINUM, level, held_back=False)
    # Gold itself is still held at its ceiling, and the engines' readings are not used.
    gold = priority_saturation(replicas, unpreemptable(GOLD, BANDS, inflight), TARGETS)
    assert gold == pytest.approx(0.85)
    assert not may_admit(GOLD, gold, held_back=False)


def test_the_in_flight_target_is_per_unit_of_weight() -> None:
    replicas = [replica("a", priority_scheduling=True, weight=3.0)]
    assert priority_saturation(replicas, 15, TARGETS) == pytest.approx(0.5)


def test_a_model_with_no_replica_admits_nothing() -> None:
    assert priority_saturation([], 0, TARGETS) == math.inf


def test_the_engine_priority_is_the_distance_from_the_top_band() -> None:
    assert [engine_priority(b, PLATINUM) for b in BANDS] == [0, 100, 200, 300]
    custom = (BandRule("now", 10, 1.0), BandRule("later", 3, 0.5))
    assert engine_priority(custom[1], custom[0]) == 7
