"""A whole pass: replicas on unreachable and lost nodes, failed and removed replicas,
scaling down newest first, on-demand starts and idle stops, preemption by class, owner
quotas, and the sentences `ctl explain` prints."""

from __future__ import annotations

from control_world import (
    NOW,
    UTC_ZONE,
    catalog,
    cpu_box,
    cpu_profile,
    decide,
    gpu_profile,
    h100x8,
    model,
    node,
    placed,
    replica,
)

from llmgw.control.decisions.cluster import ModelDemand
from llmgw.control.decisions.plan import explain


def stops(p: object) -> list[tuple[str, str, bool]]:
    return [(s.replica_id, s.reason, s.drain) for s in p.stops]  # type: ignore[attr-defined]


def test_nothing_to_change_is_an_empty_plan_that_still_explains() -> None:
    cat = catalog(model("m", gpu_profile(), min=1))
    p = decide(cat, [node("h", h100x8())], [replica("r1", "m", "h100", ("h", ["0"]))])
    assert p.empty
    assert p.explanations["m"] == ("wants 1 replica, from scaling: min 1, max 1; 1 live",)


def test_an_unreachable_nodes_replicas_count_and_it_gets_nothing_new() -> None:
    cat = catalog(model("m", gpu_profile(), min=2))
    nodes = [node("u", h100x8(), "unreachable"), node("h", h100x8())]
    p = decide(cat, nodes, [replica("r1", "m", "h100", ("u", ["0"]))])
    assert not p.stops
    assert placed(p) == {"m": ["h"]}  # u had seven free cards and was passed over


def test_a_lost_nodes_replicas_are_written_off_and_placed_again_elsewhere() -> None:
    cat = catalog(model("m", gpu_profile(), min=1))
    nodes = [node("l", h100x8(), "lost"), node("h", h100x8())]
    p = decide(cat, nodes, [replica("r1", "m", "h100", ("l", ["0"]))])
    assert stops(p) == [("r1", "lost", False)]
    assert placed(p) == {"m": ["h"]}
    # A node the registry no longer knows is as gone as a lost one.
    forgotten = decide(cat, nodes[1:], [replica("r1", "m", "h100", ("l", ["0"]))])
    assert stops(forgotten) == [("r1", "lost", False)]


def test_failed_replicas_are_acknowledged_and_do_not_count() -> None:
    cat = catalog(model("m", gpu_profile(), min=1))
    p = decide(cat, [node("h", h100x8())], [replica("r1", "m", "h100", ("h", ["0"]), phase="failed")])
    assert stops(p) == [("r1", "failed", False)]
    assert placed(p) == {"m": ["h"]}
    assert p.starts[0].assignments[0].devices == ("0",)  # a failed engine holds nothing


def test_a_model_that_left_the_catalog_is_stopped_with_a_drain() -> None:
    cat = catalog(model("m", gpu_profile(), min=0, max=0))
    p = decide(cat, [node("h", h100x8())], [replica("r1", "old", "h100", ("h", ["0"]))])
    assert stops(p) == [("r1", "removed", True)]


def test_scale_down_stops_the_newest_first() -> None:
    cat = catalog(model("m", gpu_profile(), min=1, max=1))
    replicas = [
        replica("old", "m", "h100", ("h", ["0"]), since=NOW - 900),
        replica("newest", "m", "h100", ("h", ["1"]), since=NOW - 100),
        replica("newer", "m", "h100", ("h", ["2"]), since=NOW - 500),
    ]
    p = decide(cat, [node("h", h100x8())], replicas)
    assert stops(p) == [("newest", "scale_down", True), ("newer", "scale_down", True)]


def test_leaving_a_schedule_window_stops_for_that_reason() -> None:
    window = {"from": "08:00", "to": "10:00", "min": 2}
    cat = catalog(model("m", gpu_profile(), min=1, max=1, scaling={"schedule": [window]}))
    two = [replica("a", "m", "h100", ("h", ["0"]), since=NOW - 9), replica("b", "m", "h100", ("h", ["1"]))]
    assert stops(decide(cat, [node("h", h100x8())], two)) == [("a", "outside_schedule", True)]


def test_on_demand_starts_on_a_waiting_request_and_stops_when_idle() -> None:
    cat = catalog(model("m", gpu_profile(), min=0, max=1, scaling={"idle_timeout": "5m"}))
    nodes = [node("h", h100x8())]
    assert not decide(cat, nodes).starts
    asked = decide(cat, nodes, demand={"m": ModelDemand(waiting=True, last_request_at=NOW)})
    assert placed(asked) == {"m": ["h"]}
    running = [replica("r1", "m", "h100", ("h", ["0"]))]
    kept = decide(cat, nodes, running, {"m": ModelDemand(last_request_at=NOW - 60)})
    assert kept.empty
    idle = decide(cat, nodes, running, {"m": ModelDemand(last_request_at=NOW - 600)})
    assert stops(idle) == [("r1", "idle", True)]


def test_a_guard_model_is_placed_like_any_critical_model() -> None:
    judge = model(
        "judge", gpu_profile(), min=1, role="guard", guard={"format": "qwen3guard"}, source="Qwen/Guard"
    )
    assert placed(decide(catalog(judge), [node("h", h100x8())])) == {"judge": ["h"]}


def full_node_of(*owners: tuple[str, str, float]) -> list:  # type: ignore[type-arg]
    """Replicas filling node h's eight cards, two each: (id, model, since)."""
    return [
        replica(rid, m, "h100", ("h", [str(2 * i), str(2 * i + 1)]), since=since)
        for i, (rid, m, since) in enumerate(owners)
    ]


def test_a_higher_class_preempts_the_lowest_class_newest_first_and_no_more_than_needed() -> None:
    cat = catalog(
        model("vip", gpu_profile(tp=2), min=1, **{"class": "critical"}),
        model("std", gpu_profile(tp=2), min=2, max=2),
        model("cheap", gpu_profile(tp=2), min=2, max=2, **{"class": "opportunistic"}),
    )
    running = full_node_of(
        ("s1", "std", NOW - 50),
        ("s2", "std", NOW - 10),
        ("c1", "cheap", NOW - 900),
        ("c2", "cheap", NOW - 100),
    )
    p = decide(cat, [node("h", h100x8())], running)
    assert [(s.model, s.preempts, s.assignments[0].devices) for s in p.starts] == [
        ("vip", ("c2",), ("6", "7"))
    ]
    assert stops(p) == [("c2", "preempted", True)]
    assert "model vip outranks it" in " ".join(p.explanations["cheap"])


def test_equal_or_higher_classes_are_never_preempted() -> None:
    cat = catalog(
        model("a", gpu_profile(tp=4), min=2, max=2),
        model("b", gpu_profile(tp=4), min=2, **{"class": "critical"}),
    )
    critical = full_node_of(("b1", "b", NOW - 10), ("b2", "b", NOW))
    p = decide(cat, [node("h", h100x8())], critical)
    # a's first replica takes the four free cards; b is critical, so the second waits.
    assert placed(p) == {"a": ["h"]}
    assert not p.stops
    assert not p.starts[0].preempts
    blocked = decide(
        catalog(model("a", gpu_profile(tp=4), min=3, max=3), model("b", gpu_profile(tp=4), min=1)),
        [node("h", h100x8())],
        [
            replica("b1", "b", "h100", ("h", ["0", "1", "2", "3"])),
            replica("a1", "a", "h100", ("h", ["4", "5", "6", "7"])),
        ],
    )
    assert not blocked.starts
    assert not blocked.stops
    assert "no ready node has 4 free h100-80g (h has 0 free)" in " ".join(blocked.explanations["a"])


def test_preemption_picks_the_node_with_fewest_victims() -> None:
    cat = catalog(
        model("vip", gpu_profile(tp=4), min=1, **{"class": "critical"}),
        model("cheap", gpu_profile(tp=2), min=0, max=4, **{"class": "opportunistic"}),
        model("half", gpu_profile(tp=4), min=0, max=4, **{"class": "opportunistic"}),
    )
    running = [
        *[replica(f"c{i}", "cheap", "h100", ("a", [str(2 * i), str(2 * i + 1)])) for i in range(4)],
        replica("h1", "half", "h100", ("b", ["0", "1", "2", "3"])),
        replica("h2", "half", "h100", ("b", ["4", "5", "6", "7"])),
    ]
    demand = {"cheap": ModelDemand(last_request_at=NOW), "half": ModelDemand(last_request_at=NOW)}
    p = decide(cat, [node("a", h100x8()), node("b", h100x8())], running, demand)
    assert [(s.assignments[0].node_id, len(s.preempts)) for s in p.starts] == [("b", 1)]


def test_owner_quota_caps_the_cards_an_owners_models_hold() -> None:
    cat = catalog(model("m", gpu_profile(tp=2), min=3, owner="team:research"))
    p = decide(cat, [node("h", h100x8())], owner_quotas={"team:research": 4})
    assert len(p.starts) == 2
    assert "owner team:research holds 4 of its 4 cards" in " ".join(p.explanations["m"])


def test_explanations_say_why_each_profile_fits_nowhere_and_stay_bounded() -> None:
    profiles = [gpu_profile(f"p{i}", "h100-80g", tp=8, priority=i) for i in range(9)]
    cat = catalog(model("m", *profiles, min=5), model("tiny", cpu_profile(cores=65), min=1))
    p = decide(cat, [node("h", h100x8()), node("c", cpu_box())], [replica("x", "z", "h100", ("h", ["0"]))])
    lines = p.explanations["m"]
    assert lines[1] == "profile p8: no ready node has 8 free h100-80g (h has 7 free)"
    assert lines[-1] == "and 3 more profiles do not fit either"
    assert len(lines) == 8
    assert "profile cpu: no ready node has 65 free cores (c has 16)" in " ".join(p.explanations["tiny"])


def test_a_model_with_many_decisions_says_the_rest_in_a_count() -> None:
    cat = catalog(model("m", gpu_profile(), min=0, max=0))
    failed = [replica(f"r{i:02d}", "m", "h100", ("h", [str(i % 8)]), phase="failed") for i in range(40)]
    p = decide(cat, [node("h", h100x8())], failed)
    assert len(p.stops) == 40
    assert len(p.explanations["m"]) == 25
    assert p.explanations["m"][-1] == "and 17 more decisions"


def test_explain_tells_the_count_the_replicas_and_what_is_next() -> None:
    cat = catalog(model("m", gpu_profile(), min=2, aliases=["chat"]))
    running = [replica("r1", "m", "h100", ("h", ["0"]))]
    lines = explain(cat, [node("h", h100x8())], running, {}, NOW, tz=UTC_ZONE, model="chat")
    assert lines[0] == "wants 2 replicas, from scaling: min 2, max 2; 1 live"
    assert lines[1].startswith("starting a new replica: 1 of 2 wanted; profile h100 on h")
    assert lines[2] == "replica r1 (h100) is ready on h"
    assert explain(cat, [], [], {}, NOW, tz=UTC_ZONE, model="nope") == ["model 'nope' is not in the catalog"]
