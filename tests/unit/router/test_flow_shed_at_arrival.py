"""FlowControl refuses at arrival a request its queue would not reach within queue_ttl,
by the queue's recent drain rate, instead of holding it for the ttl; a queue that drains
in time, or one with no history, queues as before."""

from __future__ import annotations

import asyncio

from flow_rig import Rig, enqueue, refusal, rig, run, settle


def served(r: Rig, band: str, admitted: list[str]) -> asyncio.Task[None]:
    """A request that waits, then is sent (leaving admission's pending count)."""

    async def request() -> None:
        await r.flow.wait("m", r.flow.band(band))
        r.flow.dispatched("m")
        admitted.append(band)

    return asyncio.ensure_future(request())


def test_a_stuck_queue_refuses_newcomers_at_once_with_retry_after() -> None:
    async def test() -> None:
        r = rig(queue_ttl=6.0)
        r.saturate()
        first = enqueue(r, "bronze")
        second = enqueue(r, "bronze")
        await settle()
        assert r.flow.queued("m") == {"bronze": 2}
        # Four seconds with waiters and nothing released: about one release per
        # 1.5 s of busy time (tau = 2 s), so a third in line would wait about 4.5 s,
        # within the ttl, and a fourth 6 s, not.
        r.clock.now += 4.0
        r.flow.release()
        third = enqueue(r, "bronze")
        await settle()
        assert not third.done()
        fourth = enqueue(r, "bronze")
        error = await refusal(fourth)
        assert error.status == 503
        assert error.code == "queue_full"
        assert error.retry_after is not None
        assert error.retry_after >= 1.0
        assert "router.admission.queue_ttl" in error.message
        assert r.flow.queued("m") == {"bronze": 3}
        assert r.flow.counts.shed == {("m", "bronze"): 1}
        for task in (first, second, third):
            task.cancel()

    run(test)


def test_a_queue_that_drains_in_time_keeps_taking_newcomers() -> None:
    async def test() -> None:
        r = rig(queue_ttl=6.0)
        r.saturate()
        admitted: list[str] = []
        for _ in range(40):
            served(r, "gold", admitted)
            await settle()
            # One leaves every 0.2 s: the queue of one or two drains well within the ttl.
            r.clock.now += 0.2
            r.idle()
            r.flow.release()
            r.saturate()
            await settle()
        assert len(admitted) == 40
        assert r.flow.counts.shed == {}

    run(test)


def test_a_band_starved_by_a_higher_one_sheds_while_the_higher_one_queues() -> None:
    async def test() -> None:
        r = rig(queue_ttl=3.0, per_band=1000, total=1000)
        r.saturate()
        bronze_refused = 0
        gold_admitted: list[str] = []
        for _ in range(30):
            bronze = enqueue(r, "bronze")
            served(r, "gold", gold_admitted)
            await settle()
            if bronze.done():
                await refusal(bronze)
                bronze_refused += 1
            # Room for one gold request every 0.2 s; bronze never gets any.
            r.clock.now += 0.2
            r.replica().inflight = 8  # saturation 0.8: under gold's ceiling, over bronze's
            r.flow.release()
            r.saturate()
            await settle()
        assert len(gold_admitted) == 30
        assert bronze_refused > 20
        assert r.flow.counts.shed.get(("m", "gold"), 0) == 0

    run(test)
