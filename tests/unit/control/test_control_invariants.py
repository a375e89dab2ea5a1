"""Invariants over generated worlds: a device is never given to two replicas, and a
model never has more live replicas than its ceiling. Each world is placed twice: from
nothing, then again after the catalog's counts and classes change under the replicas
the first pass started."""

from __future__ import annotations

from collections import Counter
from typing import Any

from control_world import NOW, UTC_ZONE, cards, catalog, counter, gpu_profile, inventory, model, node
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmgw.catalog import Catalog
from llmgw.control.decisions.capacity import Capacity
from llmgw.control.decisions.cluster import ModelDemand, NodeView, ReplicaView
from llmgw.control.decisions.placement import FITS, check, needs_of, place, score
from llmgw.control.decisions.plan import Plan, plan
from llmgw.protocol.inventory import WeightsEntry

CLASSES = ["", "critical", "standard", "opportunistic"]


@st.composite
def worlds(draw: st.DrawFn) -> tuple[list[NodeView], list[dict[str, Any]], list[dict[str, Any]]]:
    nodes = [
        node(
            f"n{i}",
            inventory(cards(draw(st.sampled_from(["h100-80g", "a100-80g"])), draw(st.integers(0, 8)))),
        )
        for i in range(draw(st.integers(1, 4)))
    ]

    def definitions() -> list[dict[str, Any]]:
        out = []
        for i in range(4):
            low = draw(st.integers(0, 3))
            extra: dict[str, Any] = {"class": draw(st.sampled_from(CLASSES))}
            tp = draw(st.sampled_from([1, 2, 4, 8]))
            out.append(
                model(
                    f"m{i}",
                    gpu_profile("h100", "h100-80g", tp=tp, priority=1),
                    gpu_profile("a100", "a100-80g", tp=tp),
                    min=low,
                    max=low + draw(st.integers(0, 2)),
                    **extra,
                )
            )
        return out

    return nodes, definitions(), definitions()


def assert_sound(cat: Catalog, before: list[ReplicaView], p: Plan) -> list[ReplicaView]:
    stopped = {s.replica_id for s in p.stops}
    kept = [r for r in before if r.id not in stopped]
    after = kept + [
        ReplicaView(s.replica_id, s.model, s.profile, s.assignments, "pending", NOW) for s in p.starts
    ]
    # Never one device for two replicas: a start may only reuse what its preemptions free.
    taken = Counter((a.node_id, d) for r in after for a in r.assignments for d in a.devices)
    assert all(n == 1 for n in taken.values()), taken
    live = Counter(r.model for r in after)
    for m in cat.models():
        assert live[m.name] <= m.scaling.max
    return after


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds(), st.booleans())
def test_no_device_twice_and_never_above_max(
    world: tuple[list[NodeView], list[dict[str, Any]], list[dict[str, Any]]], asked: bool
) -> None:
    nodes, first, second = world
    demand = {f"m{i}": ModelDemand(waiting=asked, last_request_at=NOW if asked else None) for i in range(4)}
    cat = catalog(*first)
    start = plan(cat, nodes, [], demand, NOW, tz=UTC_ZONE, new_id=counter())
    replicas = assert_sound(cat, [], start)
    changed = catalog(*second)
    second_ids = counter()
    again = plan(
        changed, nodes, replicas, demand, NOW, tz=UTC_ZONE, new_id=lambda m: "again-" + second_ids(m)
    )
    assert_sound(changed, replicas, again)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds(), st.data())
def test_the_walk_most_free_first_finds_what_scoring_every_node_finds(
    world: tuple[list[NodeView], list[dict[str, Any]], list[dict[str, Any]]], data: st.DataObject
) -> None:
    nodes, first, second = world
    # Weights on some nodes, so the holders' shortcut is exercised too.
    nodes = [
        node(
            n.id,
            n.inventory.model_copy(
                update={"weights": (WeightsEntry(name="org--m1", size_bytes=1, kind="dir"),)}
            ),
        )
        if data.draw(st.booleans())
        else n
        for n in nodes
    ]
    cat = catalog(*first)
    replicas = assert_sound(cat, [], plan(cat, nodes, [], {}, NOW, tz=UTC_ZONE, new_id=counter()))
    capacity = Capacity(nodes, None)
    for r in replicas:
        capacity.hold(capacity.holding(r, cat))
    for m in catalog(*second).models():
        for need in needs_of(m, capacity):
            found = place(capacity, need)
            fitting = [n for n in capacity.nodes.values() if n.ready and check(capacity, n, need) == FITS]
            best = min(fitting, key=lambda n: score(n, need)) if fitting else None
            assert (found.assignments[0].node_id if found else None) == (best.id if best else None)
