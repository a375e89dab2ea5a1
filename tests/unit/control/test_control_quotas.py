"""Owners' quotas along the tenancy tree: a start is made only where the model's owner
and every scope above it with a quota has room; a preemption never buys more than a
quota; the sentences `ctl explain` prints name the scope and the figures."""

from __future__ import annotations

from control_world import (
    NOW,
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

from llmgw.control.decisions.capacity import Capacity
from llmgw.control.decisions.cluster import ModelDemand
from llmgw.control.decisions.quotas import Quotas, chain

TREE = {"project:p": "team:t", "team:t": "org:o", "team:u": "org:o"}


def said(p: object, model_name: str) -> str:
    return " ".join(p.explanations[model_name])  # type: ignore[attr-defined]


def test_a_team_quota_blocks_a_second_replica() -> None:
    cat = catalog(model("m", gpu_profile(tp=2), min=2, owner="team:t"))
    p = decide(cat, [node("h", h100x8())], owner_quotas={"team:t": 2}, owner_parents=TREE)
    assert placed(p) == {"m": ["h"]}
    assert "profile h100: owner team:t holds 2 of its 2 cards, and a replica takes 2" in said(p, "m")


def test_an_org_quota_caps_two_teams_together() -> None:
    cat = catalog(
        model("a", gpu_profile(), min=2, owner="team:t"),
        model("b", gpu_profile(), min=2, owner="team:u"),
    )
    p = decide(cat, [node("h", h100x8())], owner_quotas={"org:o": 3}, owner_parents=TREE)
    assert placed(p) == {"a": ["h", "h"], "b": ["h"]}
    assert "profile h100: org:o, above owner team:u, holds 3 of its 3 cards, and a replica takes 1" in said(
        p, "b"
    )


def test_a_projects_models_count_against_its_team_with_what_already_runs() -> None:
    cat = catalog(
        model("team-model", gpu_profile(), min=1, owner="team:t"),
        model("project-model", gpu_profile(), min=3, owner="project:p"),
    )
    running = [replica("r1", "team-model", "h100", ("h", ["0"]))]
    p = decide(cat, [node("h", h100x8())], running, owner_quotas={"team:t": 2}, owner_parents=TREE)
    assert placed(p) == {"project-model": ["h"]}
    assert "team:t, above owner project:p, holds 2 of its 2 cards" in said(p, "project-model")
    # The project's own quota is checked as well, nearest first.
    tighter = decide(
        cat, [node("h", h100x8())], running, owner_quotas={"team:t": 8, "project:p": 1}, owner_parents=TREE
    )
    assert placed(tighter) == {"project-model": ["h"]}
    assert "owner project:p holds 1 of its 1 cards" in said(tighter, "project-model")


def test_no_quota_is_no_cap_and_a_shared_model_counts_against_nobody() -> None:
    cat = catalog(
        model("owned", gpu_profile(tp=2), min=3, owner="project:p"),
        model("shared", gpu_profile(), min=2),
    )
    p = decide(cat, [node("h", h100x8())], owner_parents=TREE, owner_quotas={"team:u": 0})
    assert placed(p) == {"owned": ["h", "h", "h"], "shared": ["h", "h"]}


def test_a_quota_counts_devices_so_cpu_profiles_are_not_held_back() -> None:
    cat = catalog(model("m", cpu_profile(cores=2), min=2, owner="team:t"))
    p = decide(cat, [node("c", cpu_box())], owner_quotas={"team:t": 0}, owner_parents=TREE)
    assert placed(p) == {"m": ["c", "c"]}


def _crowded(quota: int) -> object:
    """A critical team model with one replica on a node that lower-class replicas fill."""
    cat = catalog(
        model("vip", gpu_profile(tp=2), min=2, owner="team:t", **{"class": "critical"}),
        model("filler", gpu_profile(), min=0, max=6, **{"class": "opportunistic"}),
    )
    running = [
        replica("v1", "vip", "h100", ("h", ["0", "1"])),
        *[replica(f"f{i}", "filler", "h100", ("h", [str(i)])) for i in range(2, 8)],
    ]
    demand = {"filler": ModelDemand(last_request_at=NOW)}
    return decide(
        cat, [node("h", h100x8())], running, demand, owner_quotas={"org:o": quota}, owner_parents=TREE
    )


def test_preemption_is_never_used_to_exceed_a_quota() -> None:
    roomy = _crowded(quota=4)
    assert [len(s.preempts) for s in roomy.starts] == [2]  # type: ignore[attr-defined]
    full = _crowded(quota=2)
    assert full.empty  # type: ignore[attr-defined]
    assert "org:o, above owner team:t, holds 2 of its 2 cards, and a replica takes 2" in said(full, "vip")


def test_replicas_over_a_lowered_quota_keep_serving() -> None:
    cat = catalog(model("m", gpu_profile(tp=2), min=2, owner="team:t"))
    running = [replica(f"r{i}", "m", "h100", ("h", [str(2 * i), str(2 * i + 1)])) for i in range(2)]
    p = decide(cat, [node("h", h100x8())], running, owner_quotas={"team:t": 1}, owner_parents=TREE)
    assert p.empty


def test_capacity_counts_a_holding_against_every_scope_above_its_owner() -> None:
    capacity = Capacity([node("h", h100x8())], None, TREE)
    cat = catalog(model("m", gpu_profile(tp=2), owner="project:p"))
    held = capacity.holding(replica("r1", "m", "h100", ("h", ["0", "1"])), cat)
    capacity.hold(held)
    assert dict(capacity.owner_cards) == {"project:p": 2, "team:t": 2, "org:o": 2}
    capacity.release(held)
    assert set(capacity.owner_cards.values()) == {0}


def test_the_chain_is_nearest_first_and_safe_from_loops() -> None:
    assert chain("project:p", TREE) == ("project:p", "team:t", "org:o")
    assert chain("org:o", TREE) == ("org:o",)
    assert chain("", TREE) == ()
    assert chain("team:x", {"team:x": "org:y", "org:y": "team:x"}) == ("team:x", "org:y")
    quotas = Quotas({"team:t": 4}, TREE)
    assert quotas.allows("project:p", 4, {"team:t": 0})
    assert not quotas.allows("project:p", 1, {"team:t": 4})
    assert quotas.allows("team:u", 99, {})
