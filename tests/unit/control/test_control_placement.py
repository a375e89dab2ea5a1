"""Placement: which node a replica goes to, and why a profile fits nowhere. Each case
is a small named world in which the rule under test decides the answer."""

from __future__ import annotations

from control_world import (
    a100_mig,
    a100x4,
    cards,
    catalog,
    cpu_box,
    cpu_profile,
    decide,
    gpu_profile,
    h100x8,
    inventory,
    model,
    node,
    placed,
    replica,
)

from llmgw.config.control import Facility
from llmgw.control.decisions.capacity import weights_entry


def test_profiles_are_tried_by_priority_and_fall_through_when_the_first_fits_nowhere() -> None:
    cat = catalog(
        model(
            "chat",
            gpu_profile("a100", "a100-80g", priority=1),
            gpu_profile("h100", "h100-80g", priority=5),
            min=1,
        )
    )
    both = decide(cat, [node("a", a100x4()), node("h", h100x8())])
    assert [(s.profile, s.assignments[0].node_id) for s in both.starts] == [("h100", "h")]
    # No H100 anywhere: the lower priority takes it.
    fallen = decide(cat, [node("a", a100x4())])
    assert [(s.profile, s.assignments[0].node_id) for s in fallen.starts] == [("a100", "a")]


def test_a_mig_instance_is_a_class_of_its_own() -> None:
    cat = catalog(model("small", gpu_profile("mig", "a100-80g-mig-1g.10gb"), min=2))
    p = decide(cat, [node("m", a100_mig()), node("a", a100x4())])
    assert [s.assignments[0].devices for s in p.starts] == [("MIG-0-1",), ("MIG-0-2",)]
    # The whole card left on the MIG node is not an instance.
    whole = decide(
        catalog(model("big", gpu_profile("a100", "a100-80g", tp=2), min=1)), [node("m", a100_mig())]
    )
    assert not whole.starts
    assert any("1 free" in s for s in whole.explanations["big"])


def test_devices_held_by_live_replicas_are_not_handed_out_again() -> None:
    cat = catalog(model("chat", gpu_profile(tp=4), min=2))
    running = replica("r0", "chat", "h100", ("h", ["0", "1", "2", "3"]))
    p = decide(cat, [node("h", h100x8())], [running])
    assert [s.assignments[0].devices for s in p.starts] == [("4", "5", "6", "7")]
    # A stopping replica still holds its cards until the engine is gone.
    draining = replica("r9", "gone", "x", ("h", ["4", "5", "6", "7"]), phase="stopping")
    full = decide(cat, [node("h", h100x8())], [running, draining])
    assert not full.starts
    assert "no ready node has 4 free h100-80g (h has 0 free)" in " ".join(full.explanations["chat"])


def test_a_gpu_need_places_on_the_smallest_class_meeting_it_under_its_own_name() -> None:
    cat = catalog(model("chat", {"name": "any", "engine": "vllm", "gpu": {"min_memory_gb": 70}}, min=1))
    p = decide(cat, [node("h", h100x8()), node("a", a100x4())])
    assert [(s.profile, s.assignments[0].node_id) for s in p.starts] == [("any@a100-80g", "a")]


def test_multi_node_replica_spans_distinct_nodes_within_keep_within() -> None:
    def rack(name: str) -> dict[str, str]:
        return {"llmgw.io/rack": name}

    nodes = [
        node("n1", h100x8(labels=rack("r1"))),
        node("n2", h100x8(labels=rack("r2"))),
        node("n3", h100x8(labels=rack("r2"))),
        node("n4", h100x8()),  # no rack label: passed over
    ]
    spanning = gpu_profile("big", tp=16, nodes=2, gpus_per_node=8, keep_within="rack")
    p = decide(catalog(model("big", spanning, min=1)), nodes)
    assert placed(p) == {"big": ["n2+n3"]}
    assert all(len(a.devices) == 8 for a in p.starts[0].assignments)
    # Without the constraint any two nodes do, and the first by id win.
    free = gpu_profile("big", tp=16, nodes=2, gpus_per_node=8)
    assert placed(decide(catalog(model("big", free, min=1)), nodes)) == {"big": ["n1+n2"]}
    # One node per rack: kept within a rack, nothing fits.
    apart = [node("n1", h100x8(labels=rack("r1"))), node("n2", h100x8(labels=rack("r2")))]
    stuck = decide(catalog(model("big", spanning, min=1)), apart)
    assert not stuck.starts
    assert "needs 2 nodes within one rack" in " ".join(stuck.explanations["big"])


def test_cpu_profiles_reserve_cores_others_hold() -> None:
    cat = catalog(model("tiny", cpu_profile(cores=6), min=2))
    held = replica("c0", "other", "cpu", ("c", [], range(6)))
    p = decide(cat, [node("c", cpu_box())], [held])
    # 16 cores, 6 held: one more fits at cores 6-11, the second does not.
    assert [s.assignments[0].cpu_cores for s in p.starts] == [(6, 7, 8, 9, 10, 11)]
    assert "no ready node has 6 free cores (c has 4)" in " ".join(p.explanations["tiny"])


def test_memory_and_disk_are_required_and_disk_is_waived_where_the_weights_are() -> None:
    big_ram = catalog(model("m", cpu_profile(min_memory_gb=128), min=1))
    p = decide(big_ram, [node("small", cpu_box(memory_gb=64)), node("large", cpu_box(memory_gb=256))])
    assert placed(p) == {"m": ["large"]}
    needs_disk = catalog(model("m", cpu_profile(min_disk_gb=500), min=1, source="org/m"))
    full = decide(needs_disk, [node("c", cpu_box(disk_gb=100))])
    assert not full.starts
    assert "500 GB of disk free (c has 100 GB)" in " ".join(full.explanations["m"])
    holding = decide(needs_disk, [node("c", cpu_box(disk_gb=100, weights=["org--m"]))])
    assert placed(holding) == {"m": ["c"]}


def test_node_selector_keeps_a_profile_to_labelled_nodes() -> None:
    cat = catalog(model("m", cpu_profile(node_selector={"tier": "big"}), min=1))
    p = decide(cat, [node("a", cpu_box()), node("b", cpu_box(labels={"tier": "big"}))])
    assert placed(p) == {"m": ["b"]}
    none = decide(cat, [node("a", cpu_box(labels={"tier": "small"}))])
    assert "carries the labels tier=big" in " ".join(none.explanations["m"])


def test_engine_must_be_installed_at_the_pinned_version() -> None:
    cat = catalog(model("m", gpu_profile(engine_version="0.11"), min=1))
    old = h100x8(engines={"vllm": "0.10.2"})
    p = decide(cat, [node("old", old), node("new", h100x8(engines={"vllm": "0.11.1"}))])
    assert placed(p) == {"m": ["new"]}
    stuck = decide(cat, [node("old", old)])
    assert "has vllm 0.11 installed (old has 0.10.2)" in " ".join(stuck.explanations["m"])


def test_replicas_spread_first_then_go_where_the_weights_are() -> None:
    cat = catalog(model("m", gpu_profile(), min=3, source="org/m"))
    bare = [node("a", h100x8()), node("b", h100x8()), node("c", h100x8())]
    assert placed(decide(cat, bare)) == {"m": ["a", "b", "c"]}
    # The first replica goes where the weights are (no download); the others still
    # spread, so one node's loss never takes every replica.
    holder = [*bare[:2], node("c", h100x8(weights=["org--m"]))]
    p = decide(cat, holder)
    assert placed(p) == {"m": ["c", "a", "b"]}
    assert "holds the weights" in p.starts[0].reason
    # Among nodes with no replica yet, the ones holding the weights win.
    two_holders = [
        node("a", h100x8()),
        node("b", h100x8(weights=["org--m"])),
        node("c", h100x8(weights=["org--m"])),
    ]
    assert placed(decide(catalog(model("m", gpu_profile(), min=2, source="org/m")), two_holders)) == {
        "m": ["b", "c"]
    }
    # Only one node at all: the replicas share it.
    assert placed(decide(cat, [node("a", h100x8())])) == {"m": ["a", "a", "a"]}


def test_spread_then_most_free_capacity() -> None:
    cat = catalog(model("m", gpu_profile(), min=1))
    busy = replica("x", "other", "h100", ("a", ["0", "1", "2", "3"]))
    assert placed(decide(cat, [node("a", h100x8()), node("b", h100x8())], [busy])) == {"m": ["b"]}
    mine = replica("m0", "m", "h100", ("b", ["0"]))
    # b has more free cards than a, but a has no replica of m yet.
    assert placed(
        decide(
            catalog(model("m", gpu_profile(), min=2)),
            [node("a", h100x8()), node("b", h100x8())],
            [busy, mine],
        )
    ) == {"m": ["a"]}


def test_power_caps_keep_replicas_out_of_a_full_domain() -> None:
    facility = Facility.model_validate(
        {"budgets": [{"domain": "rack:r1", "cap_watts": 3000}], "node_watts": 500}
    ).policy()
    cat = catalog(model("m", gpu_profile(tp=4), min=1))
    nodes = [
        node("a", inventory(cards("h100-80g", 8), labels={"llmgw.io/rack": "r1"})),
        node("b", inventory(cards("h100-80g", 8), labels={"llmgw.io/rack": "r2"})),
    ]
    # Four cards at 700 W and the node's 500 W exceed rack r1's 3000 W.
    p = decide(cat, nodes, facility=facility)
    assert placed(p) == {"m": ["b"]}
    stuck = decide(cat, nodes[:1], facility=facility)
    assert "rack:r1 has 2500 W left" in " ".join(stuck.explanations["m"])
    # The profile's own figure replaces the estimate.
    light = catalog(model("m", gpu_profile(tp=4, power_watts=1000), min=1))
    assert placed(decide(light, nodes[:1], facility=facility)) == {"m": ["a"]}


def test_weights_entries_are_named_as_the_agent_lays_them_out() -> None:
    assert weights_entry("Qwen/Qwen3-8B") == "Qwen--Qwen3-8B"
    assert weights_entry("hf:org/repo/model-q4.gguf") == "org--repo"
    assert weights_entry("https://example.com:8080/a/b/file.gguf") == "example.com_8080--a--b"
    assert weights_entry("/var/lib/llmgw/weights/mine/x.gguf", "/var/lib/llmgw/weights") == "mine"
    assert weights_entry("/models/x.gguf") == "x.gguf"
