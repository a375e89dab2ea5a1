"""What a pass reports for the metrics besides its orders: each model's floor, and why a
model was left below it, in one word from a fixed set."""

from __future__ import annotations

from control_world import catalog, cpu_box, cpu_profile, decide, gpu_profile, h100x8, model, node, replica

from llmgw.control.decisions.placement import MISFIT_REASONS


def test_the_plan_gives_each_models_floor() -> None:
    cat = catalog(model("m", gpu_profile(), min=2, max=3), model("off", gpu_profile(), min=0, max=0))
    p = decide(cat, [node("h", h100x8())], [replica("r1", "m", "h100", ("h", ["0"]))])
    assert dict(p.wanted) == {"m": 2, "off": 0}
    assert dict(p.unplaced) == {}


def test_a_model_left_unplaced_says_why_in_one_word() -> None:
    cat = catalog(
        model("no-card", gpu_profile(gpu_class="a100-80g"), min=1),
        model("too-big", cpu_profile(cores=64), min=1),
        model("fits", cpu_profile(cores=4), min=1),
    )
    p = decide(cat, [node("c", cpu_box())])
    assert dict(p.unplaced) == {"no-card": "no_gpu_class", "too-big": "cores"}
    assert set(p.unplaced.values()) <= MISFIT_REASONS


def test_no_ready_node_and_a_quota_are_reasons_of_their_own() -> None:
    cpu = catalog(model("m", cpu_profile(cores=4), min=1))
    nothing = decide(cpu, [node("c", cpu_box(), "unreachable")])
    assert dict(nothing.unplaced) == {"m": "no_ready_node"}
    gpu = catalog(model("m", gpu_profile(), min=1, owner="team:t"))
    # An unreachable node's cards are not offered: its class is as good as absent.
    assert dict(decide(gpu, [node("h", h100x8(), "unreachable")]).unplaced) == {"m": "no_gpu_class"}
    quota = decide(gpu, [node("h", h100x8())], owner_quotas={"team:t": 0})
    assert dict(quota.unplaced) == {"m": "quota"}
