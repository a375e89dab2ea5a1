"""Orders are fenced by the leader's term: every order of a pass carries the term read
when the pass decided, a pass without the lease sends and publishes nothing, and a
control plane without a lease stamps 0."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from runtime_world import catalog, sim_model, world

from llmgw.control.decisions.cluster import ModelDemand
from llmgw.protocol.messages import ReplicaStatus

READY = ReplicaStatus.READY


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(test())  # type: ignore[arg-type]


def test_starts_and_stops_carry_the_term_of_the_pass_that_decided_them() -> None:
    async def test() -> None:
        term = [7]
        box: dict[str, ModelDemand] = {"chat": ModelDemand(waiting=True)}
        w = world(catalog(sim_model("chat", max=1, idle_timeout="1m")), term=lambda: term[0])
        w.reconciler._demand = lambda: box
        w.join("n1")
        await w.reconciler.run_pass()
        [(_, start)] = w.wire.starts()
        assert start.term == 7
        w.report("n1", "r1", READY)
        await w.reconciler.run_pass()
        [endpoint] = w.registry.for_model("chat")
        endpoint.inflight = 1
        term[0] = 8
        box["chat"] = ModelDemand(last_request_at=w.clock.now - 120)
        await w.reconciler.run_pass()  # decides the idle stop at term 8; it waits for the drain
        term[0] = 9
        endpoint.inflight = 0
        for _ in range(100):
            if w.wire.stops():
                break
            await asyncio.sleep(0.01)
        [(_, stop)] = w.wire.stops()
        assert stop.term == 8, "the term of the decision, not of the moment it was sent"

    run(test)


def test_a_pass_without_the_lease_orders_and_publishes_nothing() -> None:
    async def test() -> None:
        term: list[int | None] = [None]
        w = world(catalog(sim_model("chat", min=1)), term=lambda: term[0])
        w.join("n1")
        assert await w.reconciler.run_pass() is None
        assert w.wire.starts() == []
        w.report("n1", "old-1", READY, model="chat")
        await w.reconciler.run_pass()
        assert w.registry.for_model("chat") == [], "a follower's router is fed from the store"
        assert w.wire.log == []
        term[0] = 3
        await w.reconciler.run_pass()
        assert [e.id for e in w.registry.for_model("chat")] == ["old-1"]
        assert all(m.term == 3 for _, m in w.wire.sent if hasattr(m, "term"))

    run(test)


def test_without_a_lease_orders_carry_term_zero() -> None:
    async def test() -> None:
        w = world(catalog(sim_model("chat", min=1)))
        w.join("n1")
        await w.reconciler.run_pass()
        [(_, start)] = w.wire.starts()
        assert start.term == 0

    run(test)
