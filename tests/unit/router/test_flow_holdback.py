"""FlowControl's SLO hold-back (lower bands wait while a model misses its objective) and
the wait for a model with no replica (activation), bounded and counted.
"""

from __future__ import annotations

import asyncio

from flow_rig import RecordingActivator, enqueue, refusal, rig, run, settle

from llmgw.router.endpoints import EndpointSpec
from llmgw.router.flow import NoActivator
from llmgw.router.slo import Objective

# --- SLO hold-back --------------------------------------------------------------------------------


def test_a_breached_slo_holds_back_every_band_but_the_top() -> None:
    async def test() -> None:
        r = rig(objectives={"m": Objective(ttft_p99=0.5, tpot_p99=0.0)}, queue_ttl=120.0)
        r.slo.observe("m", r.clock.now, ttft=2.0, tpot=None)
        assert r.flow.admit_now("m", r.flow.band("platinum"))
        assert not r.flow.admit_now("m", r.flow.band("gold"))
        gold = enqueue(r, "gold")
        platinum = enqueue(r, "platinum")
        await settle()
        assert r.flow.release() == 1  # platinum only, though the replica is idle
        await platinum
        assert not gold.done()
        # Sixty seconds on, the slow request has left the window: gold goes.
        r.clock.now += 61.0
        assert r.flow.release() == 1
        await gold

    run(test)


def test_a_model_meeting_its_slo_holds_nobody_back() -> None:
    async def test() -> None:
        r = rig(objectives={"m": Objective(ttft_p99=0.5, tpot_p99=0.0)})
        r.slo.observe("m", r.clock.now, ttft=0.1, tpot=None)
        assert r.flow.admit_now("m", r.flow.band("bronze"))

    run(test)


def test_the_slo_of_one_model_does_not_hold_back_another() -> None:
    async def test() -> None:
        r = rig(models=("a", "b"), objectives={"a": Objective(ttft_p99=0.5, tpot_p99=0.0)})
        r.slo.observe("a", r.clock.now, ttft=2.0, tpot=None)
        assert not r.flow.admit_now("a", r.flow.band("gold"))
        assert r.flow.admit_now("b", r.flow.band("gold"))

    run(test)


# --- activation ----------------------------------------------------------------------------------


def test_a_model_with_no_replica_waits_for_one_to_be_published() -> None:
    async def test() -> None:
        activator = RecordingActivator()
        r = rig(models=("other",), activator=activator, activation_wait=30.0)
        gold = r.flow.band("gold")
        assert not r.flow.admit_now("cold", gold)
        task = asyncio.ensure_future(r.flow.wait("cold", gold))
        await settle()
        assert activator.asked == ["cold"]
        assert not task.done()
        r.registry.publish(
            [
                EndpointSpec(id="other-r1", url="http://127.0.0.1:9000", models=("other",)),
                EndpointSpec(id="cold-r1", url="http://127.0.0.1:9001", models=("cold",)),
            ]
        )
        await asyncio.wait_for(task, 5.0)
        assert r.pending("cold") == 1
        assert r.flow.counts.admitted == {("cold", "gold"): 1}

    run(test)


def test_a_replica_that_comes_up_saturated_puts_the_request_in_the_queue() -> None:
    async def test() -> None:
        r = rig(models=("other",), activation_wait=30.0)
        task = asyncio.ensure_future(r.flow.wait("cold", r.flow.band("gold")))
        await settle()
        r.registry.publish([EndpointSpec(id="cold-r1", url="http://127.0.0.1:9001", models=("cold",))])
        r.saturate("cold")  # before the waiting task resumes
        await settle()
        assert not task.done()
        assert r.flow.queued("cold") == {"gold": 1}
        r.idle("cold")
        assert r.flow.release() == 1
        await task

    run(test)


def test_a_model_that_gets_no_replica_within_activation_wait_is_503_model_not_ready() -> None:
    async def test() -> None:
        r = rig(models=("other",), activation_wait=0.05)
        error = await refusal(r.flow.wait("cold", r.flow.band("gold")))
        assert error.code == "model_not_ready"
        assert error.status == 503
        assert error.retry_after == 1.0
        assert "router.activation_wait" in error.message
        assert r.flow.queued("cold") == {}

    run(test)


def test_no_activator_is_a_seam_that_does_nothing() -> None:
    NoActivator().activate("m")  # returns, and raises nothing


def test_with_admission_off_a_model_with_no_replica_still_waits_for_one() -> None:
    async def test() -> None:
        activator = RecordingActivator()
        r = rig(models=("other",), activator=activator, activation_wait=30.0, enabled=False)
        gold = r.flow.band("gold")
        assert r.flow.admit_now("other", gold)
        assert not r.flow.admit_now("cold", gold)
        task = asyncio.ensure_future(r.flow.wait("cold", gold))
        await settle()
        assert activator.asked == ["cold"]
        r.registry.publish([EndpointSpec(id="cold-r1", url="http://127.0.0.1:9001", models=("cold",))])
        await asyncio.wait_for(task, 5.0)

    run(test)


def test_requests_waiting_for_models_to_start_are_bounded_by_the_total_and_counted() -> None:
    async def test() -> None:
        r = rig(models=("other",), activation_wait=30.0, total=2)
        gold = r.flow.band("gold")
        waiting = [asyncio.ensure_future(r.flow.wait(model, gold)) for model in ("cold", "cold")]
        await settle()
        assert r.flow.activating == {"cold": 2}
        error = await refusal(r.flow.wait("chilly", gold))
        assert error.code == "queue_full"
        assert "queue_capacity_total" in error.message
        assert r.flow.counts.shed == {("chilly", "gold"): 1}
        r.registry.publish([EndpointSpec(id="cold-r1", url="http://127.0.0.1:9001", models=("cold",))])
        await asyncio.wait_for(asyncio.gather(*waiting), 5.0)
        assert r.flow.activating == {}

    run(test)
