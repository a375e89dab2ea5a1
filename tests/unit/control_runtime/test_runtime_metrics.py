"""The control plane's series as a scrape reads them: nodes by state, replicas by model
and state, each model's floor against its ready replicas, placement failures by reason,
pass durations, leadership and agents connected. The plane runs with a hand-moved clock
and timer; agents' reports are handed to it as the hub would."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import timedelta
from zoneinfo import ZoneInfo

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from runtime_world import Clock, catalog, inventory, sim_model

from llmgw.control.runtime.metrics import ControlCollector
from llmgw.control.runtime.plane import ControlPlane, PlaneConfig
from llmgw.protocol.messages import Heartbeat, NodeSettings, Register, ReplicaState, ReplicaStatus
from llmgw.router.endpoints import EndpointRegistry
from llmgw.upstream import UpstreamClient

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _config() -> PlaneConfig:
    return PlaneConfig(
        interval=timedelta(seconds=30),
        base_backoff=timedelta(seconds=1),
        max_backoff=timedelta(seconds=10),
        unreachable_after=timedelta(seconds=4),
        lost_after=timedelta(seconds=10),
        node_settings=NodeSettings(port_range=(21000, 21999)),
        tz=ZoneInfo("UTC"),
        activation_wait=timedelta(seconds=60),
    )


def scraped(plane: ControlPlane) -> Samples:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ControlCollector(plane))
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def ticks(step: float) -> Iterator[float]:
    now = 0.0
    while True:
        yield now
        now += step


def test_a_scrape_reads_the_planes_state() -> None:
    async def test() -> None:
        clock = Clock()
        leading = [True]
        timer = ticks(0.03)  # every pass takes 30 ms on this timer
        plane = ControlPlane(
            _config(),
            catalog(sim_model("chat", min=2), sim_model("huge", cores=64, min=1)),
            EndpointRegistry(UpstreamClient(), failure_threshold=1, cooldown=10.0),
            clock=clock,
            is_leader=lambda: leading[0],
            timer=lambda: next(timer),
        )
        await plane.start()
        try:
            ready = ReplicaState(
                replica_id="chat-1",
                model="chat",
                profile="sim",
                state=ReplicaStatus.READY,
                url="http://127.0.0.1:21000",
            )
            plane.registered(Register(node_id="n1", inventory=inventory(cores=8), replicas=(ready,)))
            plane.registered(Register(node_id="n2", inventory=inventory(cores=8), replicas=()))
            clock.advance(5)  # n2 falls silent; the plane has settled
            plane.heartbeat("n1", Heartbeat(seq=1, replicas=(ready,)))
            await plane.run_pass()
            await plane.run_pass()
            out = scraped(plane)
        finally:
            await plane.close()

        assert out[("llmgw_control_nodes", (("state", "ready"),))] == 1
        assert out[("llmgw_control_nodes", (("state", "unreachable"),))] == 1
        assert out[("llmgw_control_nodes", (("state", "lost"),))] == 0
        assert out[("llmgw_control_replicas", (("model", "chat"), ("state", "ready")))] == 1
        assert out[("llmgw_control_replicas", (("model", "chat"), ("state", "pending")))] == 1
        assert out[("llmgw_control_replicas_desired", (("model", "chat"),))] == 2
        assert out[("llmgw_control_replicas_ready", (("model", "chat"),))] == 1
        assert out[("llmgw_control_replicas_desired", (("model", "huge"),))] == 1
        assert out[("llmgw_control_replicas_ready", (("model", "huge"),))] == 0
        # Counted once per pass that could not place it: 64 cores fit on no node.
        assert out[("llmgw_control_placement_failures_total", (("model", "huge"), ("reason", "cores")))] == 2
        assert out[("llmgw_control_reconcile_duration_seconds_count", ())] == 2
        assert out[("llmgw_control_reconcile_duration_seconds_sum", ())] == 0.06
        assert out[("llmgw_control_reconcile_duration_seconds_bucket", (("le", "0.025"),))] == 0
        assert out[("llmgw_control_reconcile_duration_seconds_bucket", (("le", "0.05"),))] == 2
        assert out[("llmgw_control_leader", ())] == 1
        assert out[("llmgw_control_agent_connections", ())] == 0  # reports handed in, no socket

    asyncio.run(test())


def test_a_server_that_does_not_lead_reports_no_floor_and_leader_zero() -> None:
    async def test() -> None:
        plane = ControlPlane(
            _config(),
            catalog(sim_model("chat", min=1)),
            EndpointRegistry(UpstreamClient(), failure_threshold=1, cooldown=10.0),
            clock=Clock(),
            is_leader=lambda: False,
            term=lambda: None,
        )
        await plane.start()
        try:
            await plane.run_pass()
            out = scraped(plane)
        finally:
            await plane.close()
        assert out[("llmgw_control_leader", ())] == 0
        assert not [key for key in out if key[0] == "llmgw_control_replicas_desired"]
        assert out[("llmgw_control_nodes", (("state", "ready"),))] == 0

    asyncio.run(test())
