"""SGLang's `/metrics` (served with `--enable-metrics`), from its two collectors.

Sources (looked up, not guessed):
- sgl-project/sglang `python/sglang/srt/metrics/collector.py` (main, 2025):
  SchedulerMetricsCollector's gauges (`sglang:num_running_reqs`, `num_queue_reqs`,
  `num_used_tokens`, `token_usage`, `gen_throughput`, `cache_hit_rate`,
  `max_total_num_tokens`) and TokenizerMetricsCollector's counters and histograms
  (`sglang:prompt_tokens_total`, `generation_tokens_total`, `cached_tokens_total` with
  its `cache_source` label, `num_requests_total`, `num_aborted_requests_total`,
  `time_to_first_token_seconds`, `inter_token_latency_seconds`,
  `e2e_request_latency_seconds`), with their documentation strings and default buckets;
- docs.sglang.io "Production Metrics": example output labelled `model_name`.
Scheduler gauges carry the scheduler's labels as current releases serve them
(`engine_type`, `model_name`, `pp_rank`, `tp_rank`); tokenizer metrics carry `model_name`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.metrics_core import Metric

from llmgw.sim.histogram import as_buckets
from llmgw.sim.metrics import EngineSnapshot, FamilyWriter
from llmgw.sim.options import SimOptions
from llmgw.sim.stats import EngineStats, Timing

_TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
_E2E_BUCKETS = (
    0.1,
    0.2,
    0.4,
    0.6,
    0.8,
    1,
    2,
    4,
    6,
    8,
    10,
    20,
    40,
    60,
    80,
    100,
    200,
    400,
    600,
    1200,
    1800,
    2400,
)
_ITL_BUCKETS = (
    0.002,
    0.004,
    0.006,
    0.008,
    0.010,
    0.015,
    0.020,
    0.025,
    0.030,
    0.035,
    0.040,
    0.060,
    0.080,
    0.100,
    0.200,
    0.400,
    0.600,
    0.800,
    1.000,
    2.000,
    4.000,
    6.000,
    8.000,
)
_SCHEDULER_LABELS = ["engine_type", "model_name", "pp_rank", "tp_rank"]


class SGLangMetrics:
    """SGLang's metric families for one unified (not disaggregated) engine."""

    def __init__(self, options: SimOptions) -> None:
        self._model = options.served_model
        self._scheduler_values = ["unified", options.served_model, "0", "0"]
        self._block_size = options.block_size
        self._buckets: dict[Timing, Sequence[float]] = {
            Timing.TTFT: _TTFT_BUCKETS,
            Timing.ITL: _ITL_BUCKETS,
            Timing.E2E: _E2E_BUCKETS,
        }
        self._writer = FamilyWriter()
        # gen_throughput is a rate over the last interval; SGLang's scheduler logs it
        # every few batches, the sim over the time between two scrapes.
        self._last_scrape: tuple[float, int] | None = None

    @property
    def buckets(self) -> Mapping[Timing, Sequence[float]]:
        return self._buckets

    def render(self, stats: EngineStats, snapshot: EngineSnapshot) -> bytes:
        return self._writer.write(self.families(stats, snapshot))

    def families(self, stats: EngineStats, snapshot: EngineSnapshot) -> list[Metric]:
        """Scheduler gauges first, then the tokenizer manager's counters and histograms."""
        throughput = 0.0
        if self._last_scrape is not None and snapshot.now > self._last_scrape[0]:
            then, tokens = self._last_scrape
            throughput = (stats.generation_tokens - tokens) / (snapshot.now - then)
        self._last_scrape = (snapshot.now, stats.generation_tokens)
        capacity_tokens = snapshot.kv_capacity_blocks * self._block_size
        hit_rate = stats.prefix_hits / stats.prefix_queries if stats.prefix_queries else 0.0
        out: list[Metric] = [
            self._gauge("sglang:num_running_reqs", "The number of running requests.", snapshot.running),
            self._gauge(
                "sglang:num_used_tokens",
                "The number of used tokens.",
                snapshot.kv_used_blocks * self._block_size,
            ),
            self._gauge(
                "sglang:token_usage",
                "The token usage.",
                snapshot.kv_used_blocks / snapshot.kv_capacity_blocks,
            ),
            self._gauge("sglang:gen_throughput", "The generation throughput (token/s).", throughput),
            self._gauge(
                "sglang:num_queue_reqs", "The number of requests in the waiting queue.", snapshot.waiting
            ),
            self._gauge("sglang:cache_hit_rate", "The prefix cache hit rate.", hit_rate),
            self._gauge(
                "sglang:max_total_num_tokens",
                "Maximum total number of tokens in the KV cache pool.",
                capacity_tokens,
            ),
            self._counter(
                "sglang:prompt_tokens_total", "Number of prefill tokens processed.", stats.prompt_tokens
            ),
            self._counter(
                "sglang:generation_tokens_total",
                "Number of generation tokens processed.",
                stats.generation_tokens,
            ),
        ]
        cached = CounterMetricFamily(
            "sglang:cached_tokens_total",
            "Number of cached prompt tokens by source (device/host/storage).",
            labels=["model_name", "cache_source"],
        )
        cached.add_metric([self._model, "device"], stats.prefix_hits)
        finished = sum(n for reason, n in stats.finish_reasons.items() if reason != "abort")
        out += [
            cached,
            self._counter("sglang:num_requests_total", "Number of requests processed.", finished),
            self._counter(
                "sglang:num_aborted_requests_total",
                "Number of requests aborted.",
                stats.finish_reasons.get("abort", 0),
            ),
            self._histogram(
                stats,
                Timing.TTFT,
                "sglang:time_to_first_token_seconds",
                "Histogram of time to first token in seconds.",
            ),
            self._histogram(
                stats,
                Timing.ITL,
                "sglang:inter_token_latency_seconds",
                "Histogram of inter-token latency in seconds.",
            ),
            self._histogram(
                stats,
                Timing.E2E,
                "sglang:e2e_request_latency_seconds",
                "Histogram of End-to-end request latency in seconds",
            ),
        ]
        return out

    def _gauge(self, name: str, doc: str, value: float) -> GaugeMetricFamily:
        family = GaugeMetricFamily(name, doc, labels=_SCHEDULER_LABELS)
        family.add_metric(self._scheduler_values, value)
        return family

    def _counter(self, name: str, doc: str, value: float) -> CounterMetricFamily:
        family = CounterMetricFamily(name, doc, labels=["model_name"])
        family.add_metric([self._model], value)
        return family

    def _histogram(self, stats: EngineStats, key: Timing, name: str, doc: str) -> HistogramMetricFamily:
        histogram = stats.histograms[key]
        family = HistogramMetricFamily(name, doc, labels=["model_name"])
        family.add_metric([self._model], buckets=as_buckets(histogram), sum_value=histogram.total)
        return family
