"""The rig the FlowControl tests share: a FlowControl over real EndpointRegistry
replicas (no sockets), a fake clock, and helpers to start, settle and refuse requests."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import pytest

from llmgw.errors import NoCapacity
from llmgw.router.admission import BandRule
from llmgw.router.endpoints import Endpoint, EndpointRegistry, EndpointSpec
from llmgw.router.flow import FlowControl, FlowRules
from llmgw.router.scoring import ScoringTargets
from llmgw.router.slo import Objective, SloTracker
from llmgw.upstream import UpstreamClient

START = 1000.0
# The seed's default bands.
PLATINUM = BandRule("platinum", 400, 1.00)
GOLD = BandRule("gold", 300, 0.85)
SILVER = BandRule("silver", 200, 0.60)
BRONZE = BandRule("bronze", 100, 0.30)
BANDS = (PLATINUM, GOLD, SILVER, BRONZE)


class Clock:
    """The injected clock: a float the test moves."""

    def __init__(self, now: float = START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@dataclass
class RecordingActivator:
    asked: list[str] = field(default_factory=list)

    def activate(self, model: str) -> None:
        self.asked.append(model)


@dataclass
class Rig:
    flow: FlowControl
    registry: EndpointRegistry
    clock: Clock
    slo: SloTracker

    def replica(self, model: str = "m") -> Endpoint:
        return self.registry.for_model(model)[0]

    def saturate(self, model: str = "m") -> None:
        """At target: nobody, not even the top band, is admitted."""
        self.replica(model).inflight = 10

    def idle(self, model: str = "m") -> None:
        self.replica(model).inflight = 0

    def pending(self, model: str = "m") -> int:
        return dict(self.flow.models())[model].pending


def rig(
    *,
    models: tuple[str, ...] = ("m",),
    bands: tuple[BandRule, ...] = BANDS,
    per_band: int = 100,
    total: int = 100,
    queue_ttl: float = 5.0,
    interval: float = 60.0,
    activation_wait: float = 1.0,
    enabled: bool = True,
    objectives: dict[str, Objective] | None = None,
    activator: RecordingActivator | None = None,
) -> Rig:
    """A FlowControl over one replica per model, target_inflight 10 (so a request is 0.1
    of saturation). The loop's interval is long unless a test asks: releases happen when
    the test calls release() or kicks the loop."""
    client = UpstreamClient()
    registry = EndpointRegistry(client, failure_threshold=3, cooldown=10.0)
    registry.publish(
        EndpointSpec(id=f"{m}-r1", url=f"http://127.0.0.1:{9000 + i}", models=(m,))
        for i, m in enumerate(models)
    )
    clock = Clock()
    targets = ScoringTargets(
        target_waiting=4.0, target_inflight=10.0, kv_ceiling=0.9, session_load_factor=1.25, stale_after=10.0
    )
    rules = FlowRules(
        enabled=enabled,
        bands=bands,
        default_band="gold",
        queue_ttl=queue_ttl,
        per_band=per_band,
        total=total,
        interval=interval,
        activation_wait=activation_wait,
    )
    slo = SloTracker(objectives or {})
    flow = FlowControl(rules, registry, targets, slo, activator, clock=clock)
    return Rig(flow, registry, clock, slo)


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(test())


async def settle() -> None:
    """Lets every ready task run to its next await (a few loop turns; no time passes)."""
    for _ in range(5):
        await asyncio.sleep(0)


def enqueue(
    r: Rig, band: str, model: str = "m", done: list[str] | None = None, tag: str = ""
) -> asyncio.Task[None]:
    """A request that waits; appends `tag` to `done` once admitted."""

    async def request() -> None:
        await r.flow.wait(model, r.flow.band(band))
        if done is not None:
            done.append(tag or band)

    return asyncio.ensure_future(request())


async def refusal(awaitable: Awaitable[None]) -> NoCapacity:
    with pytest.raises(NoCapacity) as caught:
        await awaitable
    return caught.value
