"""The scheduler in virtual time: FCFS admission by seats and blocks, exact TTFT and steps."""

from __future__ import annotations

import math

import pytest
from scheduler_rig import job, make, run_until_idle

from llmgw.sim.scheduler import JobState
from llmgw.sim.stats import EngineStats, Timing


def test_ttft_is_the_prefill_of_the_prompt_and_each_token_one_step() -> None:
    s = make()
    j = job(1, list(range(100)), output=3)
    s.submit(j, 0.0)
    assert s.next_event_at() == pytest.approx(0.100)  # 100 uncached tokens x 1 ms
    s.advance(0.100)
    assert j.emitted == 1
    assert j.first_token_at == pytest.approx(0.100)
    # One running request: each further token costs 10 + 1 x 1 ms.
    assert s.next_event_at() == pytest.approx(0.111)
    run_until_idle(s)
    assert j.state is JobState.FINISHED
    assert j.finished_at == pytest.approx(0.122)


def test_a_late_advance_releases_every_due_token_at_its_own_time() -> None:
    s = make()
    j = job(1, list(range(10)), output=5)
    s.submit(j, 0.0)
    touched = s.advance(10.0)
    assert [t.id for t in touched] == [1] * 5
    assert j.finished_at == pytest.approx(0.010 + 4 * 0.011)


def test_decode_steps_slow_down_as_more_requests_run() -> None:
    s = make()
    a, b = job(1, [1, 2], output=3), job(2, [3, 4], output=3)
    s.submit(a, 0.0)
    s.submit(b, 0.0)
    s.advance(0.002)  # both first tokens, at 2 ms
    assert a.emitted == b.emitted == 1
    # Two running: a step is 10 + 2 x 1 ms.
    assert s.next_event_at() == pytest.approx(0.014)


def test_beyond_max_seqs_requests_wait_first_come_first_served() -> None:
    s = make(max_seqs=2)
    jobs = [job(i, [i] * 4, output=2) for i in range(1, 5)]
    for j in jobs:
        s.submit(j, 0.0)
    assert (s.running, s.waiting) == (2, 2)
    assert [j.state for j in jobs] == [JobState.RUNNING] * 2 + [JobState.WAITING] * 2
    run_until_idle(s)
    admitted = [j.admitted_at for j in jobs]
    assert admitted[0] == admitted[1] == 0.0
    # The third is admitted the moment the first finishes, and not before the fourth.
    assert admitted[2] == pytest.approx(jobs[0].finished_at)
    assert admitted[2] <= admitted[3]
    assert all(j.state is JobState.FINISHED for j in jobs)


def test_queueing_adds_to_time_to_first_token() -> None:
    s = make(max_seqs=1)
    first, second = job(1, [1] * 10, output=2), job(2, [2] * 10, output=2)
    s.submit(first, 0.0)
    s.submit(second, 0.0)
    run_until_idle(s)
    queue = second.admitted_at - second.arrived_at
    assert queue == pytest.approx(first.finished_at)
    assert second.first_token_at - second.arrived_at == pytest.approx(queue + 0.010)


def test_a_head_that_does_not_fit_in_kv_blocks_holds_back_the_queue() -> None:
    # 10 blocks: the first request takes 8, the second needs 4 and the third only 1.
    s = make(max_seqs=8, kv_blocks=10)
    big = job(1, list(range(100)), output=28)  # 128 tokens = 8 blocks
    middle = job(2, list(range(200, 250)), output=14)  # 64 tokens = 4 blocks
    small = job(3, [7], output=1)
    for j in (big, middle, small):
        s.submit(j, 0.0)
    assert big.state is JobState.RUNNING
    assert middle.state is JobState.WAITING
    assert small.state is JobState.WAITING  # FCFS: no overtaking
    run_until_idle(s)
    assert middle.admitted_at == pytest.approx(big.finished_at)
    assert small.admitted_at == pytest.approx(big.finished_at)


def test_a_cached_prefix_is_not_prefilled_again() -> None:
    s = make()
    shared = list(range(1000, 1160))  # 10 full blocks
    first = job(1, [*shared, 1, 2, 3], output=1)
    s.submit(first, 0.0)
    run_until_idle(s)
    second = job(2, [*shared, 4, 5, 6], output=1, at=1.0)
    s.submit(second, 1.0)
    assert second.cached_tokens == 160
    run_until_idle(s)
    assert first.first_token_at - first.arrived_at == pytest.approx(0.163)
    assert second.first_token_at - second.arrived_at == pytest.approx(0.003)


def test_abort_frees_a_seat_and_its_blocks_at_once() -> None:
    s = make(max_seqs=1)
    running, waiting = job(1, [1] * 40, output=50), job(2, [2] * 40, output=1)
    s.submit(running, 0.0)
    s.submit(waiting, 0.0)
    s.abort(running, 0.05)
    assert running.state is JobState.ABORTED
    assert waiting.state is JobState.RUNNING
    assert waiting.admitted_at == pytest.approx(0.05)
    s.abort(running, 0.06)  # a second abort changes nothing
    run_until_idle(s)
    assert s.pool.used_blocks == 0


def test_abort_of_a_waiting_request_removes_it_from_the_queue() -> None:
    s = make(max_seqs=1)
    first, second = job(1, [1], output=2), job(2, [2], output=2)
    s.submit(first, 0.0)
    s.submit(second, 0.0)
    s.abort(second, 0.0)
    assert s.waiting == 0
    run_until_idle(s)
    assert math.isnan(second.admitted_at)


def test_resubmitting_a_job_is_refused() -> None:
    s = make()
    j = job(1, [1], output=1)
    s.submit(j, 0.0)
    with pytest.raises(ValueError, match="already submitted"):
        s.submit(j, 0.0)


def test_statistics_follow_the_timeline() -> None:
    stats = EngineStats({Timing.TTFT: [0.05, 0.2], Timing.ITL: [0.02], Timing.E2E: [1.0]}, recent=10)
    s = make(stats=stats)
    shared = list(range(64))
    first = job(1, [*shared, 1], output=3)
    s.submit(first, 0.0)
    run_until_idle(s)
    second = job(2, [*shared, 2], output=2, at=1.0)
    s.submit(second, 1.0)
    run_until_idle(s)
    assert stats.prompt_tokens == 130
    assert stats.computed_prompt_tokens == 130 - 64
    assert stats.generation_tokens == 5
    assert (stats.prefix_queries, stats.prefix_hits) == (130, 64)
    assert stats.finish_reasons["length"] == 2
    ttft = stats.histograms[Timing.TTFT]
    assert ttft.count == 2
    assert ttft.cumulative()[0] == (0.05, 1)  # the cached one was fast
    assert stats.histograms[Timing.ITL].count == 3
    assert [j.id for j in stats.recent] == [1, 2]


def test_time_spent_before_submission_falls_inside_the_simulated_prefill() -> None:
    s = make()
    j = job(1, list(range(20)), output=1, at=1.000)
    s.submit(j, 1.004)  # the server took 4 ms to read and tokenize it
    assert j.admitted_at == pytest.approx(1.000)
    assert s.next_event_at() == pytest.approx(1.020)


def test_a_seat_freed_after_arrival_admits_at_the_moment_it_freed() -> None:
    s = make(max_seqs=1)
    first = job(1, [1], output=1)
    s.submit(first, 0.0)  # its only token comes at 1 ms
    late = job(2, [2], output=1, at=0.0005)
    s.submit(late, 0.003)
    assert late.admitted_at == pytest.approx(first.finished_at)
    assert late.admitted_at == pytest.approx(0.001)


def test_a_job_cannot_arrive_after_it_is_submitted() -> None:
    with pytest.raises(ValueError, match="arrives after"):
        make().submit(job(1, [1], output=1, at=2.0), 1.0)
