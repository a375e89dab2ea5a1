"""Reconcile passes as traces: a span per pass, and below it a span per placement
decision naming the model, the replica, its nodes and the outcome, as the SDK's
in-memory exporter receives them."""

from __future__ import annotations

import asyncio

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from runtime_world import World, catalog, sim_model, world

from llmgw.config.observability import Tracing
from llmgw.obs.tracing import build_traces


def traced_passes(w: World, passes: int) -> list[ReadableSpan]:
    exporter = InMemorySpanExporter()
    traces = build_traces(Tracing(), {}, exporter)
    assert traces is not None
    w.reconciler.spans = traces.spans

    async def run() -> None:
        for _ in range(passes):
            await w.reconciler.run_pass()

    asyncio.run(run())
    traces.close()
    return list(exporter.get_finished_spans())


def test_a_pass_that_places_a_replica_has_a_placement_span_below_it() -> None:
    w = world(catalog(sim_model("chat", min=1)))
    w.join("n1")
    spans = traced_passes(w, 1)
    (reconcile,) = [s for s in spans if s.name == "control.reconcile"]
    (place,) = [s for s in spans if s.name == "control.place"]
    assert reconcile.context is not None
    assert place.parent is not None
    assert place.parent.span_id == reconcile.context.span_id
    assert dict(reconcile.attributes or {}) == {"llmgw.leader": True, "llmgw.starts": 1, "llmgw.stops": 0}
    attributes = dict(place.attributes or {})
    assert (attributes["llmgw.model"], attributes["llmgw.replica"]) == ("chat", "r1")
    assert attributes["llmgw.nodes"] == ("n1",)
    assert attributes["llmgw.outcome"] == "ordered"
    assert attributes["llmgw.reason"]


def test_a_pass_that_decides_nothing_is_a_span_with_no_decisions() -> None:
    w = world(catalog(sim_model("chat", min=1)))  # no node to place it on
    spans = traced_passes(w, 2)
    assert [s.name for s in spans] == ["control.reconcile", "control.reconcile"]
    assert all((s.attributes or {})["llmgw.starts"] == 0 for s in spans)


def test_a_server_that_does_not_lead_says_so() -> None:
    w = world(catalog(sim_model("chat", min=1)), term=lambda: None)
    w.join("n1")
    (reconcile,) = traced_passes(w, 1)
    assert dict(reconcile.attributes or {}) == {"llmgw.leader": False}
