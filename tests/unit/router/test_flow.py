"""FlowControl, driven with a fake clock and a real event loop: the fast path, queueing,
release order, the bounds (TTL, per band, total with lowest-band shedding), a waiting
client leaving, the accounting of requests admitted but not yet sent, SLO hold-back and
the wait for an on-demand model's first replica.

Replicas are published into a real EndpointRegistry (no sockets are opened) and made
busy or idle by setting their `inflight`, the gateway's own count. Each test runs its
coroutine with asyncio.run; `settle` lets the tasks it started reach their next await.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import pytest

from llmgw.errors import BadRequest, NoCapacity
from llmgw.router.admission import BandRule
from llmgw.router.endpoints import Endpoint, EndpointRegistry, EndpointSpec
from llmgw.router.flow import FlowControl, FlowRules, NoActivator
from llmgw.router.scoring import ScoringTargets
from llmgw.router.slo import Objective, SloTracker
from llmgw.upstream import UpstreamClient

START = 1000.0
BANDS = (
    BandRule("platinum", 400, 1.00),
    BandRule("gold", 300, 0.85),
    BandRule("silver", 200, 0.60),
    BandRule("bronze", 100, 0.30),
)


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


# --- bands ---------------------------------------------------------------------------------------


def test_a_request_naming_no_band_gets_the_default() -> None:
    async def test() -> None:
        r = rig()
        assert r.flow.band(None).name == "gold"
        assert r.flow.band("").name == "gold"
        assert r.flow.band("bronze").name == "bronze"

    run(test)


def test_an_unknown_band_is_a_bad_request_naming_the_bands() -> None:
    async def test() -> None:
        r = rig()
        with pytest.raises(BadRequest) as caught:
            r.flow.band("diamond")
        assert caught.value.code == "unknown_band"
        assert caught.value.param == "band"
        assert "'diamond'" in caught.value.message
        assert "platinum, gold, silver, bronze" in caught.value.message

    run(test)


# --- the fast path -------------------------------------------------------------------------------


def test_an_unloaded_model_admits_at_once_and_counts_it_pending_until_dispatched() -> None:
    async def test() -> None:
        r = rig()
        gold = r.flow.band("gold")
        assert r.flow.admit_now("m", gold)
        assert r.pending() == 1
        assert r.flow.counts.admitted == {("m", "gold"): 1}
        assert r.flow.counts.queued == {}
        r.flow.dispatched("m")
        assert r.pending() == 0
        r.flow.dispatched("m")  # never below zero
        assert r.pending() == 0

    run(test)


def test_admitted_but_not_dispatched_requests_count_toward_saturation() -> None:
    """Bronze's ceiling is 0.3 and each request is 0.1: three go while the replica still
    shows nothing in flight, the fourth does not; once they are sent (the replica's own
    count takes over) and finish, there is room again."""

    async def test() -> None:
        r = rig()
        bronze = r.flow.band("bronze")
        assert [r.flow.admit_now("m", bronze) for _ in range(4)] == [True, True, True, False]
        assert r.pending() == 3
        for _ in range(3):
            r.flow.dispatched("m")
        r.replica().inflight = 3
        assert not r.flow.admit_now("m", bronze)
        r.replica().inflight = 0
        assert r.flow.admit_now("m", bronze)

    run(test)


def test_a_saturated_model_does_not_admit_at_once() -> None:
    async def test() -> None:
        r = rig()
        r.replica().inflight = 9  # 0.9: past gold's 0.85, under platinum's 1.0
        assert not r.flow.admit_now("m", r.flow.band("gold"))
        assert r.flow.admit_now("m", r.flow.band("platinum"))
        assert r.flow.counts.admitted == {("m", "platinum"): 1}

    run(test)


def test_admission_off_admits_everything_and_counts_nothing() -> None:
    async def test() -> None:
        r = rig(enabled=False)
        r.saturate()
        assert r.flow.admit_now("m", r.flow.band("bronze"))
        r.flow.dispatched("m")
        assert r.flow.counts.admitted == {}
        assert r.flow.models() == []

    run(test)


def test_nobody_skips_a_queue_on_the_fast_path() -> None:
    """While bronze waits, even platinum (which the saturation would let through) goes
    through the queue, where it is released first."""

    async def test() -> None:
        r = rig()
        r.replica().inflight = 5  # 0.5: bronze waits, platinum could go
        done: list[str] = []
        bronze = enqueue(r, "bronze", done=done)
        await settle()
        assert not r.flow.admit_now("m", r.flow.band("platinum"))
        platinum = enqueue(r, "platinum", done=done)
        await settle()
        assert r.flow.release() == 1
        await platinum
        assert done == ["platinum"]
        assert r.flow.queued("m") == {"bronze": 1, "platinum": 0}
        bronze.cancel()
        await asyncio.gather(bronze, return_exceptions=True)

    run(test)


# --- queueing and release order ------------------------------------------------------------------


def test_a_waiting_request_is_released_when_capacity_frees() -> None:
    async def test() -> None:
        r = rig()
        r.saturate()
        task = enqueue(r, "gold")
        await settle()
        assert r.flow.queued("m") == {"gold": 1}
        assert r.flow.counts.queued == {("m", "gold"): 1}
        assert r.flow.release() == 0
        assert not task.done()
        r.idle()
        r.clock.now += 0.25
        assert r.flow.release() == 1
        await task
        assert r.flow.queued("m") == {"gold": 0}
        assert r.pending() == 1
        assert r.flow.counts.admitted == {("m", "gold"): 1}
        waited = r.flow.counts.waited[("m", "gold")]
        assert waited.count == 1
        assert waited.total == pytest.approx(0.25)

    run(test)


def test_release_serves_higher_bands_first_and_fcfs_within_a_band() -> None:
    async def test() -> None:
        r = rig()
        r.saturate()
        done: list[str] = []
        arrivals = ["bronze-1", "gold-1", "silver-1", "gold-2", "platinum-1", "silver-2", "platinum-2"]
        tasks = [enqueue(r, name.split("-")[0], done=done, tag=name) for name in arrivals]
        await settle()
        r.idle()
        # Each release adds 0.1: platinum ×2 (0.2), gold ×2 (0.4), silver ×2 (0.6 stops
        # there: silver's ceiling), bronze not at all (0.3).
        assert r.flow.release() == 6
        await asyncio.gather(*tasks[1:])
        assert done == ["platinum-1", "platinum-2", "gold-1", "gold-2", "silver-1", "silver-2"]
        assert r.flow.queued("m")["bronze"] == 1
        assert r.pending() == 6
        tasks[0].cancel()
        await asyncio.gather(tasks[0], return_exceptions=True)

    run(test)


def test_each_release_is_checked_against_the_saturation_it_leaves() -> None:
    async def test() -> None:
        r = rig()
        r.saturate()
        tasks = [enqueue(r, "gold") for _ in range(5)]
        await settle()
        r.replica().inflight = 6  # 0.6, 0.7 and 0.8 are under gold's 0.85; the fourth would be at 0.9
        assert r.flow.release() == 3
        assert r.flow.queued("m") == {"gold": 2}
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    run(test)


def test_a_lower_band_never_overtakes_a_waiting_higher_one() -> None:
    """With a lower band whose ceiling is higher (an operator may write that), the lower
    band still waits while the higher one does."""

    async def test() -> None:
        bands = (BandRule("interactive", 200, 0.5), BandRule("batch", 100, 1.0))
        r = rig(bands=bands)
        r.saturate()
        done: list[str] = []
        first = enqueue(r, "interactive", done=done)
        second = enqueue(r, "batch", done=done)
        await settle()
        r.replica().inflight = 6  # interactive may not go (0.6 ≥ 0.5); batch could
        assert r.flow.release() == 0
        assert done == []
        r.replica().inflight = 4
        assert r.flow.release() == 2
        await asyncio.gather(first, second)
        assert done == ["interactive", "batch"]

    run(test)


def test_models_queue_separately() -> None:
    async def test() -> None:
        r = rig(models=("a", "b"))
        r.saturate("a")
        task = enqueue(r, "gold", model="a")
        await settle()
        assert r.flow.admit_now("b", r.flow.band("bronze"))
        assert r.flow.queued("a") == {"gold": 1}
        assert r.flow.queued("b") == {}
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    run(test)


# --- queue_ttl ------------------------------------------------------------------------------------


def test_a_request_waiting_past_queue_ttl_is_refused_with_retry_after() -> None:
    async def test() -> None:
        r = rig(queue_ttl=8.0)
        r.saturate()
        task = enqueue(r, "silver")
        await settle()
        r.clock.now += 7.99
        r.flow.release()
        assert not task.done()
        r.clock.now += 0.01
        r.flow.release()
        error = await refusal(task)
        assert error.code == "queue_timeout"
        assert error.status == 503
        assert error.retry_after == 2.0  # a quarter of queue_ttl
        assert "router.admission.queue_ttl" in error.message
        assert r.flow.queued("m") == {"silver": 0}
        assert r.flow.counts.expired == {("m", "silver"): 1}
        assert r.pending() == 0

    run(test)


def test_a_short_queue_ttl_still_asks_for_at_least_a_second() -> None:
    async def test() -> None:
        r = rig(queue_ttl=0.5)
        r.saturate()
        task = enqueue(r, "gold")
        await settle()
        r.clock.now += 0.5
        r.flow.release()
        assert (await refusal(task)).retry_after == 1.0

    run(test)


def test_expiry_takes_only_the_requests_past_their_ttl() -> None:
    async def test() -> None:
        r = rig(queue_ttl=5.0)
        r.saturate()
        old = enqueue(r, "gold")
        await settle()
        r.clock.now += 3.0
        young = enqueue(r, "gold")
        await settle()
        r.clock.now += 2.0
        r.flow.release()
        assert (await refusal(old)).code == "queue_timeout"
        assert not young.done()
        assert r.flow.queued("m") == {"gold": 1}
        young.cancel()
        await asyncio.gather(young, return_exceptions=True)

    run(test)


# --- queue_capacity_per_band ----------------------------------------------------------------------


def test_a_full_band_queue_refuses_the_newcomer_at_once() -> None:
    async def test() -> None:
        r = rig(per_band=2, total=100, queue_ttl=20.0)
        r.saturate()
        waiting = [enqueue(r, "gold"), enqueue(r, "gold")]
        await settle()
        error = await refusal(r.flow.wait("m", r.flow.band("gold")))
        assert error.code == "queue_full"
        assert error.status == 503
        assert error.retry_after == 5.0
        assert "queue_capacity_per_band" in error.message
        assert r.flow.counts.shed == {("m", "gold"): 1}
        # Another band has its own queue.
        silver = enqueue(r, "silver")
        await settle()
        assert r.flow.queued("m") == {"gold": 2, "silver": 1}
        for task in [*waiting, silver]:
            task.cancel()
        await asyncio.gather(*waiting, silver, return_exceptions=True)

    run(test)


# --- queue_capacity_total -------------------------------------------------------------------------


def test_a_full_total_sheds_the_newest_of_the_lowest_band_for_a_higher_newcomer() -> None:
    async def test() -> None:
        r = rig(per_band=5, total=3)
        r.saturate()
        bronze_1 = enqueue(r, "bronze")
        silver = enqueue(r, "silver")
        await settle()
        r.clock.now += 1.0
        bronze_2 = enqueue(r, "bronze")
        await settle()
        gold_1 = enqueue(r, "gold")
        await settle()
        shed = await refusal(bronze_2)
        assert shed.code == "queue_full"
        assert "higher band" in shed.message
        assert not bronze_1.done()
        assert r.flow.queued("m") == {"bronze": 1, "silver": 1, "gold": 1}
        assert r.flow.counts.shed == {("m", "bronze"): 1}
        gold_2 = enqueue(r, "gold")
        await settle()
        assert (await refusal(bronze_1)).code == "queue_full"
        gold_3 = enqueue(r, "gold")
        await settle()
        assert (await refusal(silver)).code == "queue_full"  # the lowest band waiting now
        assert r.flow.queued("m") == {"bronze": 0, "silver": 0, "gold": 3}
        # Only the newcomer's own band is left: the newcomer is refused.
        refused = await refusal(r.flow.wait("m", r.flow.band("gold")))
        assert "queue_capacity_total" in refused.message
        # A higher band still makes room, taking the newest gold.
        platinum = enqueue(r, "platinum")
        await settle()
        assert (await refusal(gold_3)).code == "queue_full"
        assert not gold_1.done()
        assert not gold_2.done()
        assert r.flow.counts.shed == {("m", "bronze"): 2, ("m", "silver"): 1, ("m", "gold"): 2}
        rest = [gold_1, gold_2, platinum]
        for task in rest:
            task.cancel()
        await asyncio.gather(*rest, return_exceptions=True)

    run(test)


def test_a_full_total_refuses_a_newcomer_of_the_lowest_band() -> None:
    async def test() -> None:
        r = rig(per_band=5, total=2)
        r.saturate()
        waiting = [enqueue(r, "silver"), enqueue(r, "bronze")]
        await settle()
        error = await refusal(r.flow.wait("m", r.flow.band("bronze")))
        assert error.code == "queue_full"
        assert "queue_capacity_total" in error.message
        assert r.flow.queued("m") == {"silver": 1, "bronze": 1}
        assert not any(task.done() for task in waiting)
        for task in waiting:
            task.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)

    run(test)


def test_the_total_spans_models_and_sheds_the_newest_wherever_it_waits() -> None:
    async def test() -> None:
        r = rig(models=("a", "b"), per_band=5, total=2)
        r.saturate("a")
        r.saturate("b")
        older = enqueue(r, "bronze", model="a")
        await settle()
        r.clock.now += 1.0
        newer = enqueue(r, "bronze", model="b")
        await settle()
        gold = enqueue(r, "gold", model="a")
        await settle()
        assert (await refusal(newer)).code == "queue_full"
        assert not older.done()
        assert r.flow.queued("a") == {"bronze": 1, "gold": 1}
        assert r.flow.queued("b") == {"bronze": 0}
        assert r.flow.counts.shed == {("b", "bronze"): 1}
        for task in (older, gold):
            task.cancel()
        await asyncio.gather(older, gold, return_exceptions=True)

    run(test)


# --- clients that leave, and the pending count ----------------------------------------------------


def test_a_waiting_request_that_is_cancelled_leaves_its_queue_at_once() -> None:
    async def test() -> None:
        r = rig()
        r.saturate()
        leaving = enqueue(r, "gold", tag="leaving")
        done: list[str] = []
        staying = enqueue(r, "gold", done=done, tag="staying")
        await settle()
        leaving.cancel()
        await asyncio.gather(leaving, return_exceptions=True)
        assert leaving.cancelled()
        assert r.flow.queued("m") == {"gold": 1}
        assert r.pending() == 0
        r.idle()
        assert r.flow.release() == 1
        await staying
        assert done == ["staying"]
        assert r.pending() == 1

    run(test)


def test_a_request_cancelled_after_release_but_before_dispatch_gives_its_place_back() -> None:
    async def test() -> None:
        r = rig()
        r.saturate()
        task = enqueue(r, "gold")
        await settle()
        r.idle()
        assert r.flow.release() == 1
        assert r.pending() == 1
        task.cancel()  # before the task has resumed from its wait
        await asyncio.gather(task, return_exceptions=True)
        assert task.cancelled()
        assert r.pending() == 0

    run(test)


def test_a_request_shed_then_cancelled_does_not_touch_pending() -> None:
    async def test() -> None:
        r = rig(per_band=5, total=1)
        r.saturate()
        bronze = enqueue(r, "bronze")
        await settle()
        gold = enqueue(r, "gold")
        await asyncio.sleep(0)  # gold has run and shed bronze; bronze has not resumed yet
        assert r.flow.queued("m") == {"bronze": 0, "gold": 1}
        bronze.cancel()
        await asyncio.gather(bronze, return_exceptions=True)
        assert bronze.cancelled()
        assert r.pending() == 0
        gold.cancel()
        await asyncio.gather(gold, return_exceptions=True)
        assert r.pending() == 0
        assert r.flow.queued("m") == {"bronze": 0, "gold": 0}

    run(test)


def test_release_in_the_same_turn_as_a_cancellation_skips_the_leaver() -> None:
    async def test() -> None:
        r = rig()
        r.saturate()
        leaving = enqueue(r, "gold")
        staying = enqueue(r, "gold")
        await settle()
        r.idle()
        leaving.cancel()  # the client's disconnect: the task has not run its handler yet
        released = r.flow.release()  # e.g. the run loop woken in the same loop turn
        await asyncio.gather(leaving, return_exceptions=True)
        await staying
        assert released == 1
        assert r.pending() == 1
        assert r.flow.queued("m") == {"gold": 0}

    run(test)


def test_a_leaver_skipped_by_release_leaves_no_pending_behind() -> None:
    async def test() -> None:
        r = rig()
        r.saturate()
        leaving = enqueue(r, "gold")
        await settle()
        r.idle()
        leaving.cancel()
        assert r.flow.release() == 0  # the only waiter left: nobody to let go
        await asyncio.gather(leaving, return_exceptions=True)
        assert r.pending() == 0

    run(test)


def test_expiry_in_the_same_turn_as_a_cancellation_does_not_raise() -> None:
    async def test() -> None:
        r = rig(queue_ttl=1.0)
        r.saturate()
        leaving = enqueue(r, "gold")
        await settle()
        r.clock.now += 1.0
        leaving.cancel()
        assert r.flow.release() == 0
        await asyncio.gather(leaving, return_exceptions=True)
        assert r.flow.queued("m") == {"gold": 0}
        assert r.flow.counts.expired == {}

    run(test)


def test_shedding_a_waiter_that_just_left_still_queues_the_newcomer() -> None:
    async def test() -> None:
        r = rig(per_band=5, total=1)
        r.saturate()
        leaving = enqueue(r, "bronze")
        await settle()
        gold = enqueue(r, "gold")  # scheduled before the leaver's own handler runs
        leaving.cancel()
        await settle()
        if gold.done():
            gold.result()  # raises what the newcomer's wait() raised
        assert r.flow.queued("m")["gold"] == 1
        await asyncio.gather(leaving, return_exceptions=True)
        gold.cancel()
        await asyncio.gather(gold, return_exceptions=True)

    run(test)


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


# --- the loop ------------------------------------------------------------------------------------


def test_the_loop_releases_at_once_when_a_request_finishes() -> None:
    """The interval is a minute: only the kick from finished() can release in time."""

    async def test() -> None:
        r = rig(interval=60.0)
        loop = asyncio.ensure_future(r.flow.run())
        try:
            r.saturate()
            task = enqueue(r, "gold")
            await settle()
            assert not task.done()
            r.idle()
            r.flow.finished()
            await asyncio.wait_for(task, 5.0)
            assert r.pending() == 1
        finally:
            loop.cancel()
            await asyncio.gather(loop, return_exceptions=True)

    run(test)


def test_the_loop_rechecks_every_interval_and_expires() -> None:
    async def test() -> None:
        r = rig(interval=0.001, queue_ttl=5.0)
        loop = asyncio.ensure_future(r.flow.run())
        try:
            r.saturate()
            task = enqueue(r, "gold")
            await settle()
            r.clock.now += 5.0
            with pytest.raises(NoCapacity) as caught:
                await asyncio.wait_for(task, 5.0)
            assert caught.value.code == "queue_timeout"
        finally:
            loop.cancel()
            await asyncio.gather(loop, return_exceptions=True)

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
    assert NoActivator().activate("m") is None


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
