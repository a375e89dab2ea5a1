"""FlowControl for a model whose replicas preempt by priority (the rig: flow_rig.py): a
band is admitted past lower-band work in flight, counted by band between `dispatched`
and `finished`; a model with any other replica keeps the plain rule."""

from __future__ import annotations

from flow_rig import Rig, enqueue, rig, run, settle

from llmgw.engines.load import EngineLoad
from llmgw.router.endpoints import EndpointSpec


def preempting(r: Rig, *others: EndpointSpec) -> None:
    """Republishes the rig's one replica of `m` as priority-scheduling (with `others`)."""
    spec = EndpointSpec(id="m-r1", url="http://127.0.0.1:9000", models=("m",), priority_scheduling=True)
    r.registry.publish([spec, *others])


def send(r: Rig, band: str, count: int) -> None:
    """`count` requests of `band` admitted and sent (each 0.1 of the target)."""
    rule = r.flow.band(band)
    for _ in range(count):
        assert r.flow.admit_now("m", rule)
        r.flow.dispatched("m", rule)
        r.replica().inflight += 1


def busy_engine(r: Rig) -> None:
    """What the engine reports when it holds preempted work: a queue and a full KV cache."""
    r.replica().load = EngineLoad(waiting=40.0, running=10.0, kv_usage=0.99)
    r.replica().scraped_at = r.clock.now


def test_platinum_is_admitted_past_gold_that_filled_the_replica() -> None:
    async def test() -> None:
        r = rig()
        preempting(r)
        send(r, "bronze", 1)
        send(r, "gold", 9)
        busy_engine(r)
        assert not r.flow.admit_now("m", r.flow.band("gold"))  # 0.9 of gold and above
        assert r.flow.admit_now("m", r.flow.band("platinum"))  # it preempts all of them
        r.flow.dispatched("m", r.flow.band("platinum"))
        assert dict(r.flow.models())["m"].inflight == {"bronze": 1, "gold": 9, "platinum": 1}

    run(test)


def test_finishing_frees_the_band_and_the_count_never_goes_below_zero() -> None:
    async def test() -> None:
        r = rig()
        preempting(r)
        send(r, "gold", 9)
        gold = r.flow.band("gold")
        assert not r.flow.admit_now("m", gold)
        r.flow.finished("m", gold)
        r.flow.finished("m", gold)
        assert r.flow.admit_now("m", gold)  # 7 of 10 in flight
        for _ in range(20):
            r.flow.finished("m", gold)
        assert dict(r.flow.models())["m"].inflight["gold"] == 0

    run(test)


def test_a_waiting_platinum_is_released_past_gold() -> None:
    async def test() -> None:
        r = rig()
        preempting(r)
        send(r, "gold", 9)
        done: list[str] = []
        waiting = [enqueue(r, "gold", done=done), enqueue(r, "platinum", done=done)]
        await settle()
        assert r.flow.release() == 1
        await settle()
        assert done == ["platinum"]
        waiting[0].cancel()
        await settle()

    run(test)


def test_a_model_with_one_replica_that_does_not_preempt_keeps_the_plain_rule() -> None:
    async def test() -> None:
        r = rig()
        preempting(r, EndpointSpec(id="m-r2", url="http://127.0.0.1:9100", models=("m",)))
        send(r, "gold", 9)
        busy_engine(r)  # the plain rule reads the engine: queue 40 over target 4
        assert not r.flow.admit_now("m", r.flow.band("platinum"))

    run(test)


def test_the_engine_priority_of_each_band() -> None:
    async def test() -> None:
        r = rig()
        priorities = [
            r.flow.engine_priority(r.flow.band(b)) for b in ("platinum", "gold", "silver", "bronze")
        ]
        assert priorities == [0, 100, 200, 300]

    run(test)
