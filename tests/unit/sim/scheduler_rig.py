"""What the scheduler tests share: a scheduler in virtual time, jobs, and running it dry."""

from __future__ import annotations

from llmgw.sim.cost import CostModel
from llmgw.sim.prefix_cache import BlockPool, block_hashes
from llmgw.sim.scheduler import Job, Scheduler
from llmgw.sim.stats import EngineStats

BLOCK = 16
# 1 ms per uncached prompt token; a decode step of 10 ms plus 1 ms per running request.
COST = CostModel(prefill_ms_per_token=1.0, decode_ms=10.0, decode_ms_per_seq=1.0)


def make(
    max_seqs: int = 4, kv_blocks: int = 1000, stats: EngineStats | None = None, *, priority: bool = False
) -> Scheduler:
    return Scheduler(
        max_seqs=max_seqs,
        block_size=BLOCK,
        pool=BlockPool(kv_blocks),
        cost=COST,
        observer=stats,
        priority=priority,
    )


def job(n: int, prompt: list[int], output: int, at: float = 0.0, priority: int = 0) -> Job:
    return Job(
        id=n,
        prompt_tokens=len(prompt),
        block_hashes=block_hashes(prompt, BLOCK),
        output_tokens=output,
        arrived_at=at,
        priority=priority,
    )


def run_until_idle(s: Scheduler, limit: int = 10_000) -> None:
    for _ in range(limit):
        due = s.next_event_at()
        if due is None:
            return
        s.advance(due)
    raise AssertionError("the scheduler did not go idle")
