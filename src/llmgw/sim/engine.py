"""The simulated engine at run time: the scheduler driven by one timer on the event loop.

Like a continuous-batching engine's step loop, one timer serves every request: it fires
at the scheduler's next simulated token time, releases every token due, wakes the
requests that progressed, and re-arms for the next one. Handlers never sleep on their
own; they wait to be woken and then write what has been released. Because the
scheduler stamps each token with its own simulated time (never "now"), lateness of the
timer or of a busy loop delays a write but is not added to the next token's time, so
the sim's overhead does not accumulate over a stream (see `bench/sim/overhead.py`).
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections.abc import Callable, Sequence

from llmgw.sim.cost import CostModel
from llmgw.sim.metrics import EngineSnapshot, MetricsRenderer
from llmgw.sim.metrics_llamacpp import LlamaCppMetrics
from llmgw.sim.metrics_sglang import SGLangMetrics
from llmgw.sim.metrics_vllm import VllmMetrics
from llmgw.sim.options import Flavor, SchedulingPolicy, SimOptions
from llmgw.sim.prefix_cache import BlockPool, block_hashes
from llmgw.sim.scheduler import Job, Scheduler
from llmgw.sim.stats import EngineStats
from llmgw.sim.textgen import OutputPlan
from llmgw.sim.tokenizer import Tokenizer

# uvloop's timers have millisecond resolution and may fire up to a millisecond early; a
# token due within this margin is released now rather than re-arming for a sub-tick wait.
EARLY_S = 0.0005

Clock = Callable[[], float]


def renderer_for(options: SimOptions) -> MetricsRenderer:
    """The `/metrics` renderer of the flavor the sim imitates."""
    if options.flavor is Flavor.VLLM:
        return VllmMetrics(options)
    if options.flavor is Flavor.LLAMACPP:
        return LlamaCppMetrics(options)
    return SGLangMetrics(options)


class TokenStream:
    """One request's view of the engine: its job, its planned answer, and a wake-up."""

    __slots__ = ("_pending", "_waiter", "every_token", "job", "plan")

    def __init__(self, job: Job, plan: OutputPlan, every_token: bool) -> None:
        self.job = job
        self.plan = plan
        self.every_token = every_token
        # A bare future per wait rather than an asyncio.Event: this is paid per token.
        self._waiter: asyncio.Future[None] | None = None
        self._pending = False

    def notify(self) -> None:
        """The job progressed (called by the engine)."""
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        else:
            self._pending = True

    async def wait(self) -> None:
        """Until the job progresses; read `job.emitted` and `job.done` after it returns."""
        if self._pending:
            self._pending = False
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiter = waiter
        try:
            await waiter
        finally:
            self._waiter = None


class SimEngine:
    """Tokenizer, scheduler, prefix cache and statistics of one simulated engine."""

    def __init__(self, options: SimOptions, clock: Clock = time.perf_counter) -> None:
        self.options = options
        self.clock = clock
        self.tokenizer = Tokenizer(options.vocab_size)
        self.metrics = renderer_for(options)
        self.stats = EngineStats(self.metrics.buckets, recent=options.recent_requests)
        self.pool = BlockPool(options.kv_blocks)
        cost = CostModel(
            prefill_ms_per_token=options.prefill_ms_per_token,
            decode_ms=options.decode_ms,
            decode_ms_per_seq=options.decode_ms_per_seq,
            time_scale=options.time_scale,
        )
        self.scheduler = Scheduler(
            max_seqs=options.max_seqs,
            block_size=options.block_size,
            pool=self.pool,
            cost=cost,
            observer=self.stats,
            priority=options.scheduling_policy is SchedulingPolicy.PRIORITY,
        )
        self._streams: dict[int, TokenStream] = {}
        self._ids = itertools.count(1)
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf

    def start(
        self,
        prompt_ids: Sequence[int],
        plan: OutputPlan,
        *,
        every_token: bool,
        max_tokens_param: int | None,
        tag: str,
        arrived_at: float | None = None,
        priority: int = 0,
    ) -> TokenStream:
        """Queue a generation; the returned stream is woken as its tokens are released.

        `arrived_at` is when the request reached the server (default: now). The HTTP
        layer passes the moment its handler began, so the time spent reading, parsing
        and tokenizing the request falls inside the simulated time to first token
        instead of being added to it, as it falls inside a real engine's.
        """
        now = self.clock()
        job = Job(
            id=next(self._ids),
            prompt_tokens=len(prompt_ids),
            block_hashes=block_hashes(prompt_ids, self.options.block_size),
            output_tokens=plan.tokens,
            arrived_at=now if arrived_at is None else min(arrived_at, now),
            finish_reason=plan.finish_reason,
            max_tokens_param=max_tokens_param,
            tag=tag,
            priority=priority,
        )
        stream = TokenStream(job, plan, every_token)
        self._streams[job.id] = stream
        self.stats.arrived()
        self._wake(self.scheduler.submit(job, now))
        self._arm()
        return stream

    def cancel(self, stream: TokenStream) -> None:
        """Abort a generation whose client went away; its blocks are freed at once."""
        if stream.job.done:
            return
        self._wake(self.scheduler.abort(stream.job, self.clock()))
        self._streams.pop(stream.job.id, None)
        self._arm()

    def snapshot(self) -> EngineSnapshot:
        """The gauges of this instant, for metrics and `/sim/state`."""
        now = self.clock()
        self._wake(self.scheduler.advance(now))
        self._arm()
        return EngineSnapshot(
            now=now,
            running=self.scheduler.running,
            waiting=self.scheduler.waiting,
            kv_used_blocks=self.pool.used_blocks,
            kv_capacity_blocks=self.pool.capacity,
            cached_blocks=self.pool.cached_blocks,
        )

    def render_metrics(self) -> bytes:
        """The flavor's `/metrics` text."""
        return self.metrics.render(self.stats, self.snapshot())

    def close(self) -> None:
        """Stop the timer (the server is shutting down)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
            self._timer_at = math.inf

    def _wake(self, touched: list[Job]) -> None:
        streams = self._streams
        later: list[TokenStream] = []
        for job in touched:
            stream = streams.get(job.id)
            if stream is None:
                continue
            if job.done:
                del streams[job.id]
            elif not stream.every_token:
                continue
            # Woken handlers run in the order they are notified. A first token goes
            # first: a millisecond of the sim's own delay is a large share of a short
            # time to first token and a small one of a decode step.
            if job.emitted == 1:
                stream.notify()
            else:
                later.append(stream)
        for stream in later:
            stream.notify()

    def _arm(self) -> None:
        due = self.scheduler.next_event_at()
        if due is None:
            self.close()
            return
        if self._timer is not None and self._timer_at == due:
            return
        if self._timer is not None:
            self._timer.cancel()
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(max(0.0, due - self.clock()), self._on_timer)
        self._timer_at = due

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = math.inf
        self._wake(self.scheduler.advance(self.clock() + EARLY_S))
        self._arm()
