"""The engine's timer loop on a real event loop: tokens arrive at their simulated times."""

from __future__ import annotations

import asyncio
import time

import pytest

from llmgw.sim.engine import EARLY_S, SimEngine
from llmgw.sim.options import SimOptions
from llmgw.sim.textgen import plan_output


async def _stream_times(engine: SimEngine, prompt: list[int], tokens: int) -> list[float]:
    plan = plan_output(seed=1, max_tokens=tokens, finish_reason="length")
    stream = engine.start(prompt, plan, every_token=True, max_tokens_param=tokens, tag="t")
    seen: list[float] = []
    while not stream.job.done:
        await stream.wait()
        seen += [time.perf_counter()] * (stream.job.emitted - len(seen))
    return seen


def test_tokens_are_released_at_their_simulated_times() -> None:
    # 50 ms to the first token (250 prompt tokens x 0.2 ms), then 20 ms steps.
    options = SimOptions(prefill_ms_per_token=0.2, decode_ms=20.0, decode_ms_per_seq=0.0)

    async def main() -> tuple[float, list[float], SimEngine]:
        engine = SimEngine(options)
        started = time.perf_counter()
        times = await _stream_times(engine, list(range(250)), 4)
        return started, times, engine

    started, times, engine = asyncio.run(main())
    job = engine.stats.recent[-1]
    assert job.first_token_at - job.arrived_at == pytest.approx(0.050)
    assert job.finished_at - job.first_token_at == pytest.approx(0.060)
    # A token is never released before its simulated time (beyond the timer's margin);
    # a busy machine can only make it late.
    assert times[0] >= job.first_token_at - EARLY_S
    assert times[-1] >= job.last_token_at - EARLY_S
    assert job.arrived_at >= started


def test_a_cancelled_stream_frees_its_seat_and_the_timer_stops() -> None:
    options = SimOptions(max_seqs=1, decode_ms=1000.0)

    async def main() -> SimEngine:
        engine = SimEngine(options)
        plan = plan_output(seed=1, max_tokens=50, finish_reason="length")
        first = engine.start([1, 2, 3], plan, every_token=True, max_tokens_param=50, tag="a")
        second = engine.start([4, 5, 6], plan, every_token=False, max_tokens_param=50, tag="b")
        assert engine.scheduler.waiting == 1
        engine.cancel(first)
        assert engine.scheduler.running == 1
        engine.cancel(second)
        assert engine.scheduler.running == 0
        assert engine.scheduler.next_event_at() is None
        return engine

    engine = asyncio.run(main())
    assert engine.stats.finish_reasons["abort"] == 2
    assert engine.pool.used_blocks == 0
