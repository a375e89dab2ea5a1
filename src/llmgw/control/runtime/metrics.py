"""The control plane's Prometheus series, read from its state when scraped.

Nothing here is counted as it happens but the placement failures and the pass
durations (kept by the reconciler and the plane); the rest (nodes by state, replicas
by model and phase, each model's floor against its ready replicas, leadership, agents
connected) is what the plane holds at the moment of the scrape, so a series never
lags the state `llmgw ctl` shows. Registered in the gateway's registry by
`llmgw.server.control`.

A server that does not lead holds no nodes or replicas (the leader does): it exports
its zero counts and `llmgw_control_leader 0`, so a query over several servers takes the
leader's figures by `max`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import get_args

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from llmgw.control.decisions.cluster import NodeStatus
from llmgw.control.runtime.plane import ControlPlane

NODE_STATES: tuple[str, ...] = get_args(NodeStatus)


class ControlCollector(Collector):
    """Exports one control plane's state at scrape time."""

    def __init__(self, plane: ControlPlane) -> None:
        self._plane = plane

    def collect(self) -> Iterator[Metric]:
        plane = self._plane
        nodes = GaugeMetricFamily(
            "llmgw_control_nodes",
            "Nodes by state: ready (heartbeating), unreachable (silent past unreachable_after), "
            "lost (silent past lost_after, its replicas placed again).",
            labels=["state"],
        )
        by_state: Counter[str] = Counter(view.status for view in plane.nodes())
        for state in NODE_STATES:
            nodes.add_metric([state], by_state[state])
        yield nodes
        replicas = plane.replicas()
        phases = GaugeMetricFamily(
            "llmgw_control_replicas",
            "Replicas by model and state (pending, starting, ready, stopping, stopped, failed).",
            labels=["model", "state"],
        )
        for (model, phase), count in sorted(Counter((r.model, r.phase) for r in replicas).items()):
            phases.add_metric([model, phase], count)
        yield phases
        yield from self._desired_and_ready(plane, Counter(r.model for r in replicas if r.phase == "ready"))
        failures = CounterMetricFamily(
            "llmgw_control_placement_failures",
            "Reconcile passes that left a model below its floor, by model and reason (no_profile, "
            "quota, no_gpu_class, no_ready_node, too_few_nodes, labels, engine, devices, cores, "
            "memory, disk, power).",
            labels=["model", "reason"],
        )
        for (model, reason), count in plane.reconciler.placement_failures.items():
            failures.add_metric([model, reason], count)
        yield failures
        durations = HistogramMetricFamily(
            "llmgw_control_reconcile_duration_seconds", "How long each reconcile pass took."
        )
        durations.add_metric([], plane.pass_seconds.cumulative(), plane.pass_seconds.total)
        yield durations
        yield GaugeMetricFamily(
            "llmgw_control_leader",
            "1 while this server holds the leader lease and places replicas, else 0.",
            value=1 if plane.is_leader() else 0,
        )
        yield GaugeMetricFamily(
            "llmgw_control_agent_connections",
            "Node agents connected to this control plane.",
            value=plane.hub.connections,
        )

    def _desired_and_ready(self, plane: ControlPlane, ready: Counter[str]) -> Iterator[Metric]:
        desired = GaugeMetricFamily(
            "llmgw_control_replicas_desired",
            "The live replicas each model should have now (its floor, from scaling, schedule and "
            "demand), as the last reconcile pass decided.",
            labels=["model"],
        )
        ready_family = GaugeMetricFamily(
            "llmgw_control_replicas_ready", "Replicas of each model ready to serve.", labels=["model"]
        )
        last = plane.reconciler.last_plan
        wanted = dict(last.wanted) if last is not None and plane.is_leader() else {}
        for model, floor in sorted(wanted.items()):
            desired.add_metric([model], floor)
        for model in sorted(set(wanted) | set(ready)):
            ready_family.add_metric([model], ready[model])
        yield desired
        yield ready_family

    def describe(self) -> Iterator[Metric]:
        return iter(())
