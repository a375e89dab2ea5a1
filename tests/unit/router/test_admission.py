"""Admission decisions as pure functions: a model's saturation from its replicas' live
and scraped state, whether a band goes at a given saturation, which band is shed when
every queue is full, and the p99 the SLO tracker compares. The clock is passed in."""

from __future__ import annotations

import math

import pytest
from flow_rig import BANDS, BRONZE, GOLD, PLATINUM, SILVER
from hypothesis import given, settings
from hypothesis import strategies as st

from llmgw.engines.load import EngineLoad
from llmgw.router.admission import BandRule, may_admit, p99, saturation, shed_band
from llmgw.router.breaker import Breaker
from llmgw.router.endpoints import Endpoint, EndpointSpec
from llmgw.router.scoring import ScoringTargets
from llmgw.upstream import UpstreamClient

NOW = 1000.0
TARGETS = ScoringTargets(
    target_waiting=4.0, target_inflight=2.0, kv_ceiling=0.8, session_load_factor=1.25, stale_after=10.0
)
_CLIENT = UpstreamClient()


def replica(
    eid: str = "r1",
    *,
    inflight: int = 0,
    waiting: float | None = 0.0,
    kv: float | None = 0.0,
    scraped_at: float | None = NOW,
    weight: float = 1.0,
) -> Endpoint:
    spec = EndpointSpec(id=eid, url=f"http://10.0.0.1:{8000 + len(eid)}/v1", models=("m",), weight=weight)
    e = Endpoint(spec, _CLIENT.pool_for(spec.url), Breaker(3, 10.0))
    e.inflight = inflight
    e.load = EngineLoad(waiting=waiting, running=0.0, kv_usage=kv)
    e.scraped_at = scraped_at
    return e


# --- saturation -------------------------------------------------------------------------------


def test_a_model_with_no_replica_is_infinitely_saturated() -> None:
    assert saturation([], 0, TARGETS, NOW) == math.inf
    assert not may_admit(PLATINUM, saturation([], 0, TARGETS, NOW), held_back=False)


def test_idle_replicas_are_not_saturated() -> None:
    assert saturation([replica("a"), replica("b")], 0, TARGETS, NOW) == 0.0


def test_in_flight_and_pending_count_against_weight_times_target() -> None:
    # Capacity: (1 + 3) × target_inflight 2 = 8; in flight 1 + 3, plus 2 admitted not yet sent.
    replicas = [replica("a", inflight=1, weight=1.0), replica("bb", inflight=3, weight=3.0)]
    assert saturation(replicas, 0, TARGETS, NOW) == pytest.approx(0.5)
    assert saturation(replicas, 2, TARGETS, NOW) == pytest.approx(0.75)
    assert saturation(replicas, 4, TARGETS, NOW) == pytest.approx(1.0)


def test_pending_alone_saturates_an_idle_model() -> None:
    """Requests admitted but not yet dispatched count, or a burst would all be let in
    before any of it reached a replica."""
    assert saturation([replica()], 2, TARGETS, NOW) == pytest.approx(1.0)


def test_a_replica_weight_of_zero_counts_as_one() -> None:
    assert saturation([replica(inflight=1, weight=0.0)], 0, TARGETS, NOW) == pytest.approx(0.5)


def test_the_best_replicas_queue_counts() -> None:
    # Queues of 8 and 2 against target_waiting 4: the best replica is at 0.5.
    replicas = [replica("a", waiting=8.0), replica("bb", waiting=2.0)]
    assert saturation(replicas, 0, TARGETS, NOW) == pytest.approx(0.5)


def test_the_best_replicas_kv_use_counts() -> None:
    # KV 0.8 and 0.4 against the ceiling 0.8: the best replica is at 0.5.
    replicas = [replica("a", kv=0.8), replica("bb", kv=0.4)]
    assert saturation(replicas, 0, TARGETS, NOW) == pytest.approx(0.5)


def test_queue_and_kv_are_judged_separately_each_by_its_best_replica() -> None:
    replicas = [replica("a", waiting=0.0, kv=0.8), replica("bb", waiting=8.0, kv=0.4)]
    assert saturation(replicas, 0, TARGETS, NOW) == pytest.approx(0.5)


def test_the_highest_of_in_flight_queue_and_kv_is_the_saturation() -> None:
    queue_bound = [replica(inflight=1, waiting=6.0, kv=0.4)]
    assert saturation(queue_bound, 0, TARGETS, NOW) == pytest.approx(1.5)
    kv_bound = [replica(inflight=1, waiting=1.0, kv=0.72)]
    assert saturation(kv_bound, 0, TARGETS, NOW) == pytest.approx(0.9)
    inflight_bound = [replica(inflight=2, waiting=1.0, kv=0.4)]
    assert saturation(inflight_bound, 0, TARGETS, NOW) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("scraped_at", "counted"),
    [
        pytest.param(NOW, True, id="fresh"),
        pytest.param(NOW - 10.0, True, id="exactly-stale_after-old-still-counts"),
        pytest.param(NOW - 10.01, False, id="older-than-stale_after"),
        pytest.param(None, False, id="never-scraped"),
    ],
)
def test_stale_readings_are_ignored(scraped_at: float | None, counted: bool) -> None:
    busy = replica(waiting=8.0, kv=0.8, scraped_at=scraped_at)
    assert saturation([busy], 0, TARGETS, NOW) == pytest.approx(2.0 if counted else 0.0)


def test_a_stale_replica_does_not_hide_a_fresh_ones_queue() -> None:
    """The best replica is chosen among fresh readings only: an old reading of an empty
    queue says nothing about now."""
    replicas = [replica("a", waiting=0.0, kv=0.0, scraped_at=NOW - 60.0), replica("bb", waiting=4.0, kv=0.8)]
    assert saturation(replicas, 0, TARGETS, NOW) == pytest.approx(1.0)


def test_a_stale_replicas_in_flight_still_counts() -> None:
    """In-flight counts are the gateway's own, live, never stale."""
    assert saturation([replica(inflight=2, scraped_at=None)], 0, TARGETS, NOW) == pytest.approx(1.0)


def test_signals_a_replica_does_not_report_are_ignored() -> None:
    assert saturation([replica(inflight=1, waiting=None, kv=None)], 0, TARGETS, NOW) == pytest.approx(0.5)


def test_zero_queue_or_kv_targets_switch_those_signals_off() -> None:
    off = ScoringTargets(
        target_waiting=0.0, target_inflight=2.0, kv_ceiling=0.0, session_load_factor=1.25, stale_after=10.0
    )
    assert saturation([replica(waiting=100.0, kv=1.0)], 0, off, NOW) == 0.0


# --- may_admit -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("band", "level", "admitted"),
    [
        pytest.param(PLATINUM, 0.99, True, id="platinum-under-1.00"),
        pytest.param(PLATINUM, 1.00, False, id="platinum-at-1.00"),
        pytest.param(GOLD, 0.84, True, id="gold-under-0.85"),
        pytest.param(GOLD, 0.85, False, id="gold-at-0.85"),
        pytest.param(SILVER, 0.59, True, id="silver-under-0.60"),
        pytest.param(SILVER, 0.60, False, id="silver-at-0.60"),
        pytest.param(BRONZE, 0.29, True, id="bronze-under-0.30"),
        pytest.param(BRONZE, 0.30, False, id="bronze-at-0.30"),
        pytest.param(BRONZE, 0.0, True, id="bronze-idle"),
        pytest.param(PLATINUM, math.inf, False, id="no-replica"),
    ],
)
def test_a_band_is_admitted_while_saturation_is_under_its_ceiling(
    band: BandRule, level: float, admitted: bool
) -> None:
    assert may_admit(band, level, held_back=False) is admitted


@pytest.mark.parametrize("band", BANDS, ids=[b.name for b in BANDS])
def test_a_held_back_band_waits_however_idle_the_replicas(band: BandRule) -> None:
    assert not may_admit(band, 0.0, held_back=True)


# --- shed_band -----------------------------------------------------------------------------------


def test_nothing_is_shed_while_the_queues_have_room() -> None:
    assert shed_band({"bronze": 5}, BANDS, GOLD, total=5, capacity=6) is None


def test_a_full_queue_sheds_the_lowest_band_below_the_newcomer() -> None:
    queued = {"silver": 2, "bronze": 1, "gold": 3}
    assert shed_band(queued, BANDS, PLATINUM, total=6, capacity=6) == "bronze"


def test_the_lowest_band_with_anyone_waiting_is_shed() -> None:
    queued = {"silver": 2, "bronze": 0}
    assert shed_band(queued, BANDS, GOLD, total=2, capacity=2) == "silver"


def test_a_band_missing_from_the_counts_has_nobody_waiting() -> None:
    assert shed_band({"silver": 2}, BANDS, GOLD, total=2, capacity=2) == "silver"


def test_the_bands_order_is_by_priority_not_as_listed() -> None:
    shuffled = (SILVER, PLATINUM, BRONZE, GOLD)
    assert shed_band({"silver": 1, "bronze": 1}, shuffled, GOLD, total=2, capacity=2) == "bronze"


@pytest.mark.parametrize(
    ("queued", "newcomer"),
    [
        pytest.param({"gold": 2}, GOLD, id="only-its-own-band-waits"),
        pytest.param({"platinum": 1, "gold": 1}, GOLD, id="only-higher-bands-wait"),
        pytest.param({"silver": 1, "bronze": 1}, BRONZE, id="the-newcomer-is-the-lowest-band"),
        pytest.param({}, PLATINUM, id="no-counts-at-all"),
    ],
)
def test_with_no_lower_band_waiting_the_newcomer_is_refused(
    queued: dict[str, int], newcomer: BandRule
) -> None:
    assert shed_band(queued, BANDS, newcomer, total=2, capacity=2) is None


def test_past_capacity_still_sheds() -> None:
    assert shed_band({"bronze": 3}, BANDS, SILVER, total=3, capacity=2) == "bronze"


# --- p99 -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        pytest.param([7.0], 7.0, id="one-value"),
        pytest.param([float(v) for v in range(1, 101)], 99.0, id="1..100"),
        pytest.param([float(v) for v in range(1, 102)], 100.0, id="1..101-rank-rounds-up"),
        pytest.param([float(v) for v in range(1, 201)], 198.0, id="1..200"),
        pytest.param([5.0, 1.0, 3.0], 5.0, id="small-sample-is-its-max"),
        pytest.param([float(v) for v in range(100, 0, -1)], 99.0, id="unsorted"),
    ],
)
def test_p99_is_the_nearest_rank(values: list[float], expected: float) -> None:
    assert p99(values) == expected


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(st.lists(st.floats(min_value=0.0, max_value=1e6), min_size=1, max_size=400))
def test_p99_covers_at_least_99_percent_and_is_a_sample(values: list[float]) -> None:
    value = p99(values)
    assert value in values
    at_or_below = sum(1 for v in values if v <= value)
    below = sum(1 for v in values if v < value)
    assert at_or_below * 100 >= 99 * len(values)
    assert below * 100 < 99 * len(values)
