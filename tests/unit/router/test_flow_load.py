"""FlowControl.load: the reading load scaling takes each pass — the saturation over the
replicas routed to with the requests queued at the gateway counted in, how many
replicas, and whether the objective is breached."""

from __future__ import annotations

from flow_rig import enqueue, rig, run, settle

from llmgw.router.slo import Objective


def test_no_replica_is_no_level() -> None:
    r = rig(models=("m",))
    assert r.flow.load("other") == (None, 0, False)


def test_in_flight_against_the_target() -> None:
    r = rig()
    r.replica().inflight = 5  # target_inflight 10
    assert r.flow.load("m") == (0.5, 1, False)


def test_requests_queued_at_the_gateway_count_as_in_flight() -> None:
    async def test() -> None:
        r = rig(queue_ttl=120.0)
        r.saturate()  # 10 of 10: level 1.0
        waiting = [enqueue(r, "gold") for _ in range(5)]
        await settle()
        level, ready, _ = r.flow.load("m")
        assert (level, ready) == (1.5, 1)
        for task in waiting:
            task.cancel()
        await settle()

    run(test)


def test_a_breached_objective_is_reported() -> None:
    r = rig(objectives={"m": Objective(ttft_p99=0.5, tpot_p99=0.0)})
    r.slo.observe("m", r.clock.now, ttft=2.0, tpot=None)
    assert r.flow.load("m")[2] is True
