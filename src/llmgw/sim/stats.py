"""Engine statistics in neutral terms; each flavor's metrics module names them.

vLLM, llama-server and SGLang count much the same things under different names and
with different histogram buckets. The scheduler reports admissions, tokens and
finishes here; `metrics_vllm`, `metrics_llamacpp` and `metrics_sglang` turn the totals
into each engine's exposition at scrape time. A flavor chooses which histograms it
needs (and their buckets), so the sim does not pay for timings nobody serves.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Mapping, Sequence

from llmgw.sim.histogram import Histogram
from llmgw.sim.scheduler import Job


class Timing(enum.StrEnum):
    """The per-request and per-token distributions engines publish."""

    TTFT = "ttft"  # arrival to first token
    ITL = "itl"  # between consecutive tokens of one request
    E2E = "e2e"  # arrival to last token
    QUEUE = "queue"  # arrival to admission
    PREFILL = "prefill"  # admission to first token
    DECODE = "decode"  # first token to last token
    INFERENCE = "inference"  # admission to last token
    TPOT = "tpot"  # a request's mean time per output token after the first
    PROMPT_TOKENS = "prompt_tokens"
    GENERATION_TOKENS = "generation_tokens"
    MAX_TOKENS_PARAM = "max_tokens_param"
    N_PARAM = "n_param"


class EngineStats:
    """Totals and histograms of one engine since it started (a SchedulerObserver)."""

    def __init__(self, buckets: Mapping[Timing, Sequence[float]], recent: int = 0) -> None:
        self.histograms: dict[Timing, Histogram] = {k: Histogram(v) for k, v in buckets.items()}
        self._itl = self.histograms.get(Timing.ITL)
        self.prompt_tokens = 0  # every prompt token of admitted requests
        self.computed_prompt_tokens = 0  # the uncached ones, which cost prefill
        self.generation_tokens = 0
        self.prefix_queries = 0  # in tokens, as vLLM counts them
        self.prefix_hits = 0
        self.requests_arrived = 0
        self.preemptions = 0
        self.finish_reasons: dict[str, int] = {"stop": 0, "length": 0, "abort": 0}
        self.prefill_seconds = 0.0
        self.decode_seconds = 0.0
        self.decode_steps = 0.0
        self.busy_slot_tokens = 0
        self.max_sequence_tokens = 0
        self.recent: deque[Job] = deque(maxlen=recent)

    def arrived(self) -> None:
        """A generation request reached the engine."""
        self.requests_arrived += 1

    def admitted(self, job: Job, at: float) -> None:
        self.prefix_queries += job.prompt_tokens
        self.prefix_hits += job.cached_tokens
        if not job.preemptions:
            # A resumed request's queue time was observed when it was first admitted.
            self._observe(Timing.QUEUE, at - job.arrived_at)

    def preempted(self, job: Job, at: float) -> None:
        """A running request was sent back to the queue for a better one."""
        self.preemptions += 1

    def token(self, job: Job, at: float, running: int) -> None:
        self.generation_tokens += 1
        # Each token is one slot's share of a batch step of `running` slots.
        self.decode_steps += 1.0 / running
        self.busy_slot_tokens += 1
        if job.emitted == 1:
            self.prompt_tokens += job.prompt_tokens
            self.computed_prompt_tokens += job.prompt_tokens - job.cached_tokens
            self.prefill_seconds += at - job.admitted_at
            self._observe(Timing.TTFT, at - job.arrived_at)
            self._observe(Timing.PREFILL, at - job.admitted_at)
        else:
            self.decode_seconds += at - job.last_token_at
            if self._itl is not None:
                self._itl.observe(at - job.last_token_at)

    def finished_job(self, job: Job, at: float, reason: str) -> None:
        self.finish_reasons[reason] = self.finish_reasons.get(reason, 0) + 1
        self.max_sequence_tokens = max(self.max_sequence_tokens, job.prompt_tokens + job.emitted)
        if job.emitted:
            self._observe(Timing.E2E, at - job.arrived_at)
            self._observe(Timing.DECODE, at - job.first_token_at)
            self._observe(Timing.INFERENCE, at - job.admitted_at)
            if job.emitted > 1:
                self._observe(Timing.TPOT, (at - job.first_token_at) / (job.emitted - 1))
        self._observe(Timing.PROMPT_TOKENS, job.prompt_tokens)
        self._observe(Timing.GENERATION_TOKENS, job.emitted)
        self._observe(Timing.N_PARAM, 1)
        if job.max_tokens_param is not None:
            self._observe(Timing.MAX_TOKENS_PARAM, job.max_tokens_param)
        if self.recent.maxlen:
            self.recent.append(job)

    def finished(self, job: Job, at: float) -> None:
        self.finished_job(job, at, job.finish_reason)

    def aborted(self, job: Job, at: float) -> None:
        self.finished_job(job, at, "abort")

    def _observe(self, key: Timing, value: float) -> None:
        histogram = self.histograms.get(key)
        if histogram is not None:
            histogram.observe(value)
