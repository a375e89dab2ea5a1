"""The priority policy in virtual time: queue order, preemption, recompute, stale events."""

from __future__ import annotations

import pytest
from scheduler_rig import job, make, run_until_idle

from llmgw.sim.scheduler import JobState
from llmgw.sim.stats import EngineStats, Timing


def stats() -> EngineStats:
    return EngineStats({Timing.QUEUE: (1.0,)})


def test_a_better_request_preempts_and_gets_its_first_token_after_its_prefill_alone() -> None:
    observer = stats()
    s = make(max_seqs=2, stats=observer, priority=True)
    low = [job(i, [100 * i + t for t in range(40)], output=50, priority=300) for i in (1, 2)]
    for j in low:
        s.submit(j, 0.0)
    s.advance(0.1)
    assert s.running == 2
    urgent = job(3, list(range(1000, 1010)), output=3, priority=0, at=0.1)
    s.submit(urgent, 0.1)
    assert urgent.state is JobState.RUNNING
    assert urgent.admitted_at == pytest.approx(0.1)
    # Its first token: 10 prompt tokens x 1 ms, no queueing at all.
    s.advance(0.2)
    assert urgent.first_token_at - urgent.arrived_at == pytest.approx(0.010)
    # The worst running one went (equal priorities: the latest arrived, here the higher id).
    assert [j.preemptions for j in low] == [0, 1]
    assert s.preemptions == observer.preemptions == 1


def test_the_preempted_request_resumes_recomputes_and_finishes_with_every_token() -> None:
    s = make(max_seqs=1, priority=True)
    victim = job(1, list(range(40)), output=5, priority=300)  # 2 full blocks cacheable
    s.submit(victim, 0.0)
    s.advance(0.045)  # first token at 40 ms
    assert victim.emitted == 1
    urgent = job(2, [7], output=1, priority=0, at=0.045)
    s.submit(urgent, 0.045)
    assert victim.state is JobState.WAITING
    assert victim.emitted == 1  # what it emitted is kept
    s.advance(0.046)  # the urgent one's only token: 1 prompt token x 1 ms
    assert urgent.state is JobState.FINISHED
    # (mypy keeps victim.state narrowed by the assert before advance(), which changes it)
    assert victim.state is JobState.RUNNING  # type: ignore[comparison-overlap]
    assert victim.admitted_at == pytest.approx(0.046)
    # Recompute: prompt + 1 emitted token, less the 32 prompt tokens still cached.
    assert victim.cached_tokens == 32
    assert s.next_event_at() == pytest.approx(0.046 + (40 + 1 - 32) * 0.001)
    run_until_idle(s)
    assert victim.state is JobState.FINISHED
    assert victim.emitted == victim.output_tokens == 5
    assert victim.first_token_at == pytest.approx(0.040)


def test_token_events_of_an_earlier_admission_are_ignored() -> None:
    s = make(max_seqs=1, priority=True)
    victim = job(1, list(range(40)), output=5, priority=300)
    s.submit(victim, 0.0)
    s.advance(0.045)
    # Its second token was due at 40 + 11 ms = 51 ms when it was preempted at 45 ms,
    # and it runs again from 46 ms: that stale event must not release a token.
    s.submit(job(2, [7], output=1, priority=0, at=0.045), 0.045)
    s.advance(0.046)
    assert victim.state is JobState.RUNNING
    assert s.next_event_at() == pytest.approx(0.055)
    s.advance(0.054)
    assert victim.emitted == 1
    s.advance(0.055)
    assert victim.emitted == 2
    assert victim.last_token_at == pytest.approx(0.055)


def test_blocks_that_do_not_fit_preempt_too() -> None:
    # 10 blocks: the low one takes 8 (128 tokens); the urgent one needs 4.
    s = make(max_seqs=8, kv_blocks=10, priority=True)
    low = job(1, list(range(100)), output=28, priority=300)
    s.submit(low, 0.0)
    urgent = job(2, list(range(200, 250)), output=14, priority=0, at=0.01)
    s.submit(urgent, 0.01)
    assert urgent.state is JobState.RUNNING
    assert low.state is JobState.WAITING
    run_until_idle(s)
    assert low.state is JobState.FINISHED  # type: ignore[comparison-overlap]
    assert low.emitted == 28


def test_equal_or_better_running_work_is_never_preempted() -> None:
    s = make(max_seqs=1, priority=True)
    first = job(1, [1, 2], output=5, priority=100)
    s.submit(first, 0.0)
    same = job(2, [3, 4], output=5, priority=100, at=0.001)
    worse = job(3, [5, 6], output=5, priority=200, at=0.001)
    s.submit(same, 0.001)
    s.submit(worse, 0.001)
    assert first.state is JobState.RUNNING
    assert s.preemptions == 0
    run_until_idle(s)
    assert first.finished_at <= same.admitted_at <= worse.admitted_at


def test_the_queue_is_served_by_priority_then_arrival() -> None:
    s = make(max_seqs=1, priority=True)
    s.submit(job(1, [1], output=3, priority=0), 0.0)
    waiting = [
        job(2, [2], output=1, priority=200, at=0.001),
        job(3, [3], output=1, priority=100, at=0.002),
        job(4, [4], output=1, priority=100, at=0.003),
        job(5, [5], output=1, priority=0, at=0.004),
    ]
    for j in waiting:
        s.submit(j, j.arrived_at)
    run_until_idle(s)
    order = sorted(waiting, key=lambda j: j.admitted_at)
    assert [j.id for j in order] == [5, 3, 4, 2]


def test_fcfs_ignores_priority_and_never_preempts() -> None:
    s = make(max_seqs=1)
    low = job(1, [1, 2], output=5, priority=300)
    s.submit(low, 0.0)
    urgent = job(2, [3, 4], output=1, priority=0, at=0.001)
    s.submit(urgent, 0.001)
    assert urgent.state is JobState.WAITING
    run_until_idle(s)
    assert s.preemptions == 0
    assert urgent.admitted_at == pytest.approx(low.finished_at)


def test_a_resumed_request_counts_its_queue_time_once() -> None:
    observer = stats()
    s = make(max_seqs=1, stats=observer, priority=True)
    s.submit(job(1, [1, 2], output=5, priority=300), 0.0)
    s.submit(job(2, [3, 4], output=1, priority=0, at=0.001), 0.001)
    run_until_idle(s)
    assert observer.histograms[Timing.QUEUE].count == 2
