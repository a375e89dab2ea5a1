"""FlowControl's bounds: queue_ttl, the per-band and total queue capacities (with the
lowest band's newest shed), and clients that leave while they wait or are released.
"""

from __future__ import annotations

import asyncio

from flow_rig import enqueue, refusal, rig, run, settle

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
