"""FlowControl, driven with a fake clock and a real event loop (the rig: flow_rig.py):
bands, the fast path, queueing and release order, and the loop that re-checks the queues.
The bounds are in test_flow_bounds.py, SLO hold-back and activation in
test_flow_holdback.py.
"""

from __future__ import annotations

import asyncio

import pytest
from flow_rig import enqueue, rig, run, settle

from llmgw.errors import BadRequest, NoCapacity
from llmgw.router.admission import BandRule

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
