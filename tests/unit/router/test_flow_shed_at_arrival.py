"""FlowControl refuses at arrival a request its queue would not reach within queue_ttl,
by the queue's recent drain rate, instead of holding it for the ttl (and refuses early
the waiters queued before the rate was known that it will not reach); a queue that
drains in time, or one with no history, queues as before."""

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
        # Four seconds with waiters and nothing released: one release per 1.73 s of
        # busy time at most (tau = 2 s). The second in line, with 2 s of its ttl left,
        # would wait about 3.5 s more: refused now rather than at its ttl.
        r.clock.now += 4.0
        r.flow.release()
        trimmed = await refusal(second)
        assert trimmed.code == "queue_full"
        assert "router.admission.queue_ttl" in trimmed.message
        assert not first.done()
        # Newcomers: behind one waiter about 3.5 s, behind two 5.2 s (within the ttl of
        # 6 s), behind three 6.9 s: refused on arrival.
        queued = [enqueue(r, "bronze"), enqueue(r, "bronze")]
        await settle()
        assert not any(task.done() for task in queued)
        error = await refusal(enqueue(r, "bronze"))
        assert error.status == 503
        assert error.code == "queue_full"
        assert error.retry_after is not None
        assert error.retry_after >= 1.0
        assert "router.admission.queue_ttl" in error.message
        assert r.flow.queued("m") == {"bronze": 3}
        assert r.flow.counts.shed == {("m", "bronze"): 2}
        for task in (first, *queued):
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
        at_once = 0
        bronze: list[asyncio.Task[None]] = []
        gold_admitted: list[str] = []
        for _ in range(30):
            bronze.append(enqueue(r, "bronze"))
            served(r, "gold", gold_admitted)
            await settle()
            at_once += bronze[-1].done()
            # Room for one gold request every 0.2 s; bronze never gets any.
            r.clock.now += 0.2
            r.replica().inflight = 8  # saturation 0.8: under gold's ceiling, over bronze's
            r.flow.release()
            r.saturate()
            await settle()
        assert len(gold_admitted) == 30
        assert r.flow.counts.shed.get(("m", "gold"), 0) == 0
        # Six seconds, twice the ttl, with nothing released: a head waits its ttl out
        # (the estimate is a lower bound), the rest are refused on arrival or at the
        # next release, well before their ttl.
        assert at_once > 0
        refused = [task for task in bronze if task.done()]
        codes = [(await refusal(task)).code for task in refused]
        assert codes.count("queue_full") >= 20
        assert codes.count("queue_timeout") <= 2
        assert r.flow.counts.expired.get(("m", "bronze"), 0) <= 2
        for task in bronze:
            task.cancel()

    run(test)
