"""The plane's side of scaling on load: the router's reading taken each step on the
leader only, the count carried in the demand the plan works with, `explain` giving the
figures, and a follower keeping no count."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from zoneinfo import ZoneInfo

from runtime_world import Clock, catalog, sim_model

from llmgw.control.decisions.load_scaling import ScalePolicy
from llmgw.control.runtime.plane import ControlPlane, PlaneConfig
from llmgw.protocol.messages import NodeSettings
from llmgw.router.endpoints import EndpointRegistry
from llmgw.upstream import UpstreamClient


def plane(clock: Clock, *, leader: bool = True, up_at: float = 1.0) -> ControlPlane:
    config = PlaneConfig(
        interval=timedelta(seconds=1),
        base_backoff=timedelta(seconds=1),
        max_backoff=timedelta(seconds=10),
        unreachable_after=timedelta(seconds=4),
        lost_after=timedelta(seconds=10),
        node_settings=NodeSettings(port_range=(21000, 21999)),
        tz=ZoneInfo("UTC"),
        activation_wait=timedelta(seconds=60),
        scale=ScalePolicy(up_at=up_at, up_after=10.0, down_at=0.5, down_after=60.0),
    )
    return ControlPlane(
        config,
        catalog(sim_model("chat", min=1, max=3), sim_model("fixed", min=2)),
        EndpointRegistry(UpstreamClient(), failure_threshold=1, cooldown=10.0),
        clock=clock,
        is_leader=lambda: leader,
    )


def saturated(model: str) -> tuple[float | None, int, bool]:
    return (2.0, 1, False) if model == "chat" else (None, 0, False)


def steps(p: ControlPlane, clock: Clock, count: int, every: float = 5.0) -> None:
    for _ in range(count):
        p.step_scaling()
        clock.advance(every)


def test_the_leader_scales_on_the_routers_reading_and_explains_it() -> None:
    clock = Clock()
    p = plane(clock)
    p.watch_load(saturated)
    asyncio.run(p.observe_leadership())
    steps(p, clock, 3)  # saturated at 0, 5 and 10 s: up at the third step
    chat = p.demand()["chat"]
    assert chat.load_target == 2
    assert "level 2.00 over 1 ready" in chat.load_why
    said = " ".join(p.explain("chat"))
    assert "wants 2 replicas" in said
    assert "load scaling: up to 2" in said
    # A model with no room between its bounds has no load scaling.
    assert "fixed" not in p.demand() or p.demand()["fixed"].load_target is None


def test_a_follower_or_scale_up_at_0_keeps_no_count() -> None:
    for leader, up_at in ((False, 1.0), (True, 0.0)):
        clock = Clock()
        p = plane(clock, leader=leader, up_at=up_at)
        p.watch_load(saturated)
        asyncio.run(p.observe_leadership())
        steps(p, clock, 5)
        assert "chat" not in p.demand() or p.demand()["chat"].load_target is None
