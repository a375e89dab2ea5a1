"""Reconcile passes against a recorded wire and a real endpoint registry: orders sent
once, publication only once ready, withdrawal before the stop order and after the
drain, backoff for failing models, and adopted replicas kept as they run.

Each test is a coroutine run with asyncio.run; the clock is the test's."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from datetime import timedelta
from typing import Any

from runtime_world import catalog, sim_model, world

from llmgw.control.decisions.cluster import ModelDemand
from llmgw.protocol.messages import ReplicaStatus

READY = ReplicaStatus.READY


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(test())  # type: ignore[arg-type]


def test_a_wanted_replica_is_ordered_once_and_published_only_when_ready() -> None:
    async def test() -> None:
        w = world(catalog(sim_model("chat", min=1)))
        w.join("n1")
        await w.reconciler.run_pass()
        assert [(n, m.replica_id) for n, m in w.wire.starts()] == [("n1", "r1")]
        assert w.registry.for_model("chat") == []
        # Another pass before the agent said anything: counted as pending, not ordered again.
        await w.reconciler.run_pass()
        assert len(w.wire.starts()) == 1
        assert [r.phase for r in w.book.views()] == ["pending"]
        w.report("n1", "r1", ReplicaStatus.STARTING)
        await w.reconciler.run_pass()
        assert w.registry.for_model("chat") == []
        w.report("n1", "r1", READY)
        await w.reconciler.run_pass()
        [endpoint] = w.registry.for_model("chat")
        assert endpoint.spec.url == "http://127.0.0.1:21000"
        assert endpoint.spec.api_key == "key-r1"
        assert len(w.wire.starts()) == 1

    run(test)


def test_an_order_not_acknowledged_by_a_report_is_sent_again_with_the_same_content() -> None:
    async def test() -> None:
        w = world(catalog(sim_model("chat", min=1)))
        w.join("n1")
        await w.reconciler.run_pass()
        # A heartbeat that does not list it, long after the order: the frame was lost.
        w.tick(5)
        resend = w.book.missing("n1", set(), resend_after_s=2.0)
        assert [r.id for r in resend] == ["r1"]
        resend[0].parts[0].start_sent_at = None
        await w.reconciler.run_pass()
        first, second = (m for _, m in w.wire.starts())
        assert first == second

    run(test)


def test_a_node_that_is_not_connected_gets_its_order_when_it_is() -> None:
    async def test() -> None:
        w = world(catalog(sim_model("chat", min=1)))
        w.join("n1")
        w.wire.connected_nodes.clear()
        await w.reconciler.run_pass()
        assert w.wire.starts() == []
        w.wire.connected_nodes.add("n1")
        await w.reconciler.run_pass()
        assert [m.replica_id for _, m in w.wire.starts()] == ["r1"]

    run(test)


def test_a_stopped_replica_is_withdrawn_before_its_stop_order_which_waits_for_the_drain() -> None:
    async def test() -> None:
        box: dict[str, ModelDemand] = {"chat": ModelDemand(waiting=True)}
        w = world(catalog(sim_model("chat", max=1, idle_timeout="1m")), demand=box)
        w.reconciler._demand = lambda: box
        w.join("n1")
        await w.reconciler.run_pass()
        w.report("n1", "r1", READY)
        await w.reconciler.run_pass()
        [endpoint] = w.registry.for_model("chat")
        endpoint.inflight = 1  # a request is running on it
        # Unasked for longer than the idle timeout: stopped as idle.
        box["chat"] = ModelDemand(last_request_at=w.clock.now - 120)
        await w.reconciler.run_pass()
        assert w.registry.for_model("chat") == []
        assert w.wire.stops() == [], "the stop waits while a request is in flight"
        assert [r.phase for r in w.book.views()] == ["stopping"]
        endpoint.inflight = 0
        for _ in range(100):
            if w.wire.stops():
                break
            await asyncio.sleep(0.01)
        [(node, stop)] = w.wire.stops()
        assert (node, stop.replica_id) == ("n1", "r1")
        assert stop.drain > timedelta(0)
        events = [e for e in w.wire.log if e[0] in ("publish", "stop_replica")]
        assert events[-2:] == [("publish", "", ""), ("stop_replica", "n1", "r1")]
        # The agent reports the end; the next pass acknowledges it and forgets it.
        w.report("n1", "r1", ReplicaStatus.STOPPED)
        await w.reconciler.run_pass()
        assert len(w.wire.stops()) == 2
        assert w.book.views() == []

    run(test)


def test_the_drain_is_bounded_by_the_drain_limit() -> None:
    async def test() -> None:
        box: dict[str, ModelDemand] = {"chat": ModelDemand(waiting=True)}
        w = world(catalog(sim_model("chat", max=1, idle_timeout="1m")), drain_limit_s=0.05)
        w.reconciler._demand = lambda: box
        w.join("n1")
        await w.reconciler.run_pass()
        w.report("n1", "r1", READY)
        await w.reconciler.run_pass()
        [endpoint] = w.registry.for_model("chat")
        endpoint.inflight = 3  # never finishes
        box["chat"] = ModelDemand(last_request_at=w.clock.now - 120)
        await w.reconciler.run_pass()
        for _ in range(200):
            if w.wire.stops():
                break
            await asyncio.sleep(0.01)
        assert [m.replica_id for _, m in w.wire.stops()] == ["r1"]

    run(test)


def test_a_failing_model_is_placed_again_only_after_its_backoff_which_doubles() -> None:
    async def test() -> None:
        w = world(catalog(sim_model("chat", min=1)), base_backoff=timedelta(seconds=10))
        w.join("n1")
        await w.reconciler.run_pass()
        w.report("n1", "r1", ReplicaStatus.FAILED, detail="health did not answer")
        await w.reconciler.run_pass()
        # Acknowledged (stop for the failed one), and nothing new started yet.
        assert [m.replica_id for _, m in w.wire.stops()] == ["r1"]
        assert [m.replica_id for _, m in w.wire.starts()] == ["r1"]
        assert w.book.get("r1") is None
        w.report("n1", "r1", ReplicaStatus.FAILED)  # still listed until the ack lands
        await w.reconciler.run_pass()
        assert len(w.wire.starts()) == 1, "an end heard again is not a second failure"
        assert w.book.get("r1") is None
        w.tick(10)
        await w.reconciler.run_pass()
        assert len(w.wire.starts()) == 2
        second = w.wire.starts()[-1][1].replica_id
        w.report("n1", second, ReplicaStatus.FAILED)
        await w.reconciler.run_pass()
        w.tick(10)
        await w.reconciler.run_pass()
        assert len(w.wire.starts()) == 2, "the second failure in a row waits 20 s"
        w.tick(10)
        await w.reconciler.run_pass()
        assert len(w.wire.starts()) == 3
        assert len(w.book.views()) == 1

    run(test)


class Emitted:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, dict[str, Any]]] = []

    def emit(self, event_type: str, key: str, data: Mapping[str, Any]) -> None:
        self.events.append((event_type, key, dict(data)))


def test_each_failure_is_reported_once_and_the_one_reaching_the_longest_wait_parks_the_model() -> None:
    async def test() -> None:
        w = world(
            catalog(sim_model("chat", min=1)),
            base_backoff=timedelta(seconds=10),
            max_backoff=timedelta(seconds=20),
        )
        emitted = Emitted()
        w.reconciler.events = emitted
        w.join("n1")
        await w.reconciler.run_pass()
        w.report("n1", "r1", ReplicaStatus.FAILED, detail="health did not answer")
        await w.reconciler.run_pass()
        w.report("n1", "r1", ReplicaStatus.FAILED)  # heard again before the ack: not a new failure
        await w.reconciler.run_pass()
        assert [(t, k) for t, k, _ in emitted.events] == [("model.failed", "r1")]
        assert emitted.events[0][2] == {
            "model": "chat",
            "replica": "r1",
            "nodes": ["n1"],
            "detail": "health did not answer",
            "retry_in_s": 10.0,
        }
        w.tick(10)
        await w.reconciler.run_pass()
        second = w.wire.starts()[-1][1].replica_id
        w.report("n1", second, ReplicaStatus.FAILED)
        await w.reconciler.run_pass()
        assert [(t, k) for t, k, _ in emitted.events] == [
            ("model.failed", "r1"),
            ("model.failed", second),
            ("model.parked", f"chat:{second}"),
        ]
        w.tick(20)
        await w.reconciler.run_pass()
        third = w.wire.starts()[-1][1].replica_id
        w.report("n1", third, ReplicaStatus.FAILED)
        await w.reconciler.run_pass()
        assert [t for t, _, _ in emitted.events].count("model.parked") == 1, "parked once only"

    run(test)


def test_a_replica_an_agent_reports_is_adopted_and_kept_not_restarted() -> None:
    async def test() -> None:
        w = world(catalog(sim_model("chat", min=1)))
        w.join("n1")
        w.report("n1", "old-1", READY, model="chat")
        await w.reconciler.run_pass()
        assert w.wire.sent == [], "nothing started, nothing stopped"
        [endpoint] = w.registry.for_model("chat")
        assert endpoint.id == "old-1"
        [view] = w.book.views()
        assert view.phase == "ready"
        assert view.assignments[0].node_id == "n1"

    run(test)


def test_a_lost_node_has_its_replica_written_off_and_placed_elsewhere() -> None:
    async def test() -> None:
        w = world(catalog(sim_model("chat", min=1)))
        w.join("n1")
        await w.reconciler.run_pass()
        w.report("n1", "r1", READY)
        await w.reconciler.run_pass()
        w.join("n2")
        w.nodes.disconnected("n1")
        w.wire.connected_nodes.discard("n1")
        w.clock.advance(30)
        w.nodes.heard("n2")
        await w.reconciler.run_pass()
        assert [e.id for e in w.registry.for_model("chat")] == ["r1"], "unreachable: still routed"
        assert len(w.wire.starts()) == 1
        w.clock.advance(30)
        w.nodes.heard("n2")
        await w.reconciler.run_pass()
        assert w.book.get("r1") is None
        assert [(n, m.replica_id) for n, m in w.wire.starts()][-1] == ("n2", "r2")
        assert w.registry.for_model("chat") == []

    run(test)


def test_a_follower_places_nothing_but_publishes_what_runs() -> None:
    async def test() -> None:
        w = world(catalog(sim_model("chat", min=1)))
        w.reconciler._is_leader = lambda: False
        w.join("n1")
        assert await w.reconciler.run_pass() is None
        assert w.wire.starts() == []
        w.report("n1", "old-1", READY, model="chat")
        await w.reconciler.run_pass()
        assert [e.id for e in w.registry.for_model("chat")] == ["old-1"]

    run(test)


def test_a_preempting_start_waits_until_the_preempted_replica_is_gone() -> None:
    async def test() -> None:
        low = sim_model("batch", min=1, cores=8, **{"class": "opportunistic"})
        w = world(catalog(low))
        w.join("n1")
        await w.reconciler.run_pass()
        w.report("n1", "r1", READY)
        await w.reconciler.run_pass()
        w.catalog_box[0] = catalog(low, sim_model("vital", min=1, cores=8, **{"class": "critical"}))
        await w.reconciler.run_pass()
        assert w.registry.for_model("batch") == [], "the victim is withdrawn at once"
        assert [m.replica_id for _, m in w.wire.starts()] == ["r1"], "the new start waits"
        for _ in range(100):
            if w.wire.stops():
                break
            await asyncio.sleep(0.01)
        assert [m.replica_id for _, m in w.wire.stops()] == ["r1"]
        w.report("n1", "r1", ReplicaStatus.STOPPED)
        await w.reconciler.run_pass()
        assert [(n, m.model) for n, m in w.wire.starts()][-1] == ("n1", "vital")

    run(test)
