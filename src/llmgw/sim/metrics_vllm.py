"""vLLM's `/metrics`, as the V1 engine's PrometheusStatLogger serves it.

Sources (looked up, not guessed):
- vllm-project/vllm `vllm/v1/metrics/loggers.py` (PrometheusStatLogger, v0.11/0.12
  line): names, documentation strings, label names `model_name` and `engine`, the
  `finished_reason` label of `vllm:request_success`, and every bucket list below;
- vllm `docs/design/metrics.md` and docs.vllm.ai "Production Metrics": the v1 list
  (`vllm:kv_cache_usage_perc`, `vllm:prefix_cache_queries`/`_hits` counted in tokens,
  `vllm:inter_token_latency_seconds`) and the deprecations;
- the same loggers.py at v0.9/0.10: `vllm:gpu_cache_usage_perc`,
  `vllm:gpu_prefix_cache_queries`/`_hits` ("Deprecated in 0.9 - Renamed as
  vllm:kv_cache_usage_perc") and `vllm:time_per_output_token_seconds` ("Deprecated in
  0.11 - Renamed as vllm:inter_token_latency_seconds"). `--legacy-metrics` serves these
  old names in place of the new ones, as a pre-0.9 vLLM would.

Counters are written through prometheus_client, which appends `_total` exactly as vLLM's
own prometheus_client counters do (`vllm:prompt_tokens_total`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.metrics_core import Metric

from llmgw.sim.histogram import as_buckets, one_two_five
from llmgw.sim.metrics import EngineSnapshot, FamilyWriter
from llmgw.sim.options import SimOptions
from llmgw.sim.stats import EngineStats, Timing

_TTFT_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
_ITL_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
_REQUEST_LATENCY_BUCKETS = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)
_N_BUCKETS = (1, 2, 5, 10, 20)
_FINISH_REASONS = ("stop", "length", "abort")
_SLEEP_STATES = ("awake", "weights_offloaded", "discard_all")


class VllmMetrics:
    """vLLM's metric families for one engine (label engine="0")."""

    def __init__(self, options: SimOptions) -> None:
        self._legacy = options.legacy_metrics
        self._labels = [options.served_model, "0"]
        self._options = options
        tokens = one_two_five(options.max_model_len)
        self._buckets: dict[Timing, Sequence[float]] = {
            Timing.TTFT: _TTFT_BUCKETS,
            Timing.ITL: _ITL_BUCKETS,
            Timing.TPOT: _ITL_BUCKETS,
            Timing.E2E: _REQUEST_LATENCY_BUCKETS,
            Timing.QUEUE: _REQUEST_LATENCY_BUCKETS,
            Timing.INFERENCE: _REQUEST_LATENCY_BUCKETS,
            Timing.PREFILL: _REQUEST_LATENCY_BUCKETS,
            Timing.DECODE: _REQUEST_LATENCY_BUCKETS,
            Timing.PROMPT_TOKENS: tokens,
            Timing.GENERATION_TOKENS: tokens,
            Timing.MAX_TOKENS_PARAM: tokens,
            Timing.N_PARAM: _N_BUCKETS,
        }
        self._writer = FamilyWriter()

    @property
    def buckets(self) -> Mapping[Timing, Sequence[float]]:
        return self._buckets

    def render(self, stats: EngineStats, snapshot: EngineSnapshot) -> bytes:
        return self._writer.write(self.families(stats, snapshot))

    def families(self, stats: EngineStats, snapshot: EngineSnapshot) -> list[Metric]:
        """Every family, in the order vLLM registers them."""
        legacy = self._legacy
        out: list[Metric] = [
            self._gauge(
                "vllm:num_requests_running",
                "Number of requests in model execution batches.",
                snapshot.running,
            ),
            self._gauge(
                "vllm:num_requests_waiting", "Number of requests waiting to be processed.", snapshot.waiting
            ),
        ]
        usage = snapshot.kv_used_blocks / snapshot.kv_capacity_blocks
        if legacy:
            out += [
                self._gauge(
                    "vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage.", usage
                ),
                self._counter(
                    "vllm:gpu_prefix_cache_queries",
                    "GPU prefix cache queries, in terms of number of queried tokens.",
                    stats.prefix_queries,
                ),
                self._counter(
                    "vllm:gpu_prefix_cache_hits",
                    "GPU prefix cache hits, in terms of number of cached tokens.",
                    stats.prefix_hits,
                ),
            ]
        else:
            sleep = GaugeMetricFamily(
                "vllm:engine_sleep_state",
                "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; "
                "weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.",
                labels=["model_name", "engine", "sleep_state"],
            )
            for state in _SLEEP_STATES:
                sleep.add_metric([*self._labels, state], 1.0 if state == "awake" else 0.0)
            out += [
                sleep,
                self._gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", usage),
                self._counter(
                    "vllm:prefix_cache_queries",
                    "Prefix cache queries, in terms of number of queried tokens.",
                    stats.prefix_queries,
                ),
                self._counter(
                    "vllm:prefix_cache_hits",
                    "Prefix cache hits, in terms of number of cached tokens.",
                    stats.prefix_hits,
                ),
            ]
        success = CounterMetricFamily(
            "vllm:request_success",
            "Count of successfully processed requests.",
            labels=["model_name", "engine", "finished_reason"],
        )
        for reason in _FINISH_REASONS:
            success.add_metric([*self._labels, reason], stats.finish_reasons.get(reason, 0))
        out += [
            self._counter(
                "vllm:num_preemptions", "Cumulative number of preemption from the engine.", stats.preemptions
            ),
            self._counter("vllm:prompt_tokens", "Number of prefill tokens processed.", stats.prompt_tokens),
            self._counter(
                "vllm:generation_tokens", "Number of generation tokens processed.", stats.generation_tokens
            ),
            success,
            self._histogram(
                stats,
                Timing.PROMPT_TOKENS,
                "vllm:request_prompt_tokens",
                "Number of prefill tokens processed.",
            ),
            self._histogram(
                stats,
                Timing.GENERATION_TOKENS,
                "vllm:request_generation_tokens",
                "Number of generation tokens processed.",
            ),
            self._histogram(
                stats,
                Timing.GENERATION_TOKENS,
                "vllm:request_max_num_generation_tokens",
                "Histogram of maximum number of requested generation tokens.",
            ),
            self._histogram(
                stats, Timing.N_PARAM, "vllm:request_params_n", "Histogram of the n request parameter."
            ),
            self._histogram(
                stats,
                Timing.MAX_TOKENS_PARAM,
                "vllm:request_params_max_tokens",
                "Histogram of the max_tokens request parameter.",
            ),
            self._histogram(
                stats,
                Timing.TTFT,
                "vllm:time_to_first_token_seconds",
                "Histogram of time to first token in seconds.",
            ),
        ]
        if legacy:
            out.append(
                self._histogram(
                    stats,
                    Timing.ITL,
                    "vllm:time_per_output_token_seconds",
                    "Histogram of time per output token in seconds.",
                )
            )
        else:
            out += [
                self._histogram(
                    stats,
                    Timing.ITL,
                    "vllm:inter_token_latency_seconds",
                    "Histogram of inter-token latency in seconds.",
                ),
                self._histogram(
                    stats,
                    Timing.TPOT,
                    "vllm:request_time_per_output_token_seconds",
                    "Histogram of time_per_output_token_seconds per request.",
                ),
            ]
        out += [
            self._histogram(
                stats,
                Timing.E2E,
                "vllm:e2e_request_latency_seconds",
                "Histogram of e2e request latency in seconds.",
            ),
            self._histogram(
                stats,
                Timing.QUEUE,
                "vllm:request_queue_time_seconds",
                "Histogram of time spent in WAITING phase for request.",
            ),
            self._histogram(
                stats,
                Timing.INFERENCE,
                "vllm:request_inference_time_seconds",
                "Histogram of time spent in RUNNING phase for request.",
            ),
            self._histogram(
                stats,
                Timing.PREFILL,
                "vllm:request_prefill_time_seconds",
                "Histogram of time spent in PREFILL phase for request.",
            ),
            self._histogram(
                stats,
                Timing.DECODE,
                "vllm:request_decode_time_seconds",
                "Histogram of time spent in DECODE phase for request.",
            ),
            self._cache_config_info(),
        ]
        return out

    def _gauge(self, name: str, doc: str, value: float) -> GaugeMetricFamily:
        family = GaugeMetricFamily(name, doc, labels=["model_name", "engine"])
        family.add_metric(self._labels, value)
        return family

    def _counter(self, name: str, doc: str, value: float) -> CounterMetricFamily:
        family = CounterMetricFamily(name, doc, labels=["model_name", "engine"])
        family.add_metric(self._labels, value)
        return family

    def _histogram(self, stats: EngineStats, key: Timing, name: str, doc: str) -> HistogramMetricFamily:
        histogram = stats.histograms[key]
        family = HistogramMetricFamily(name, doc, labels=["model_name", "engine"])
        family.add_metric(self._labels, buckets=as_buckets(histogram), sum_value=histogram.total)
        return family

    def _cache_config_info(self) -> GaugeMetricFamily:
        o = self._options
        info = {
            "block_size": str(o.block_size),
            "cache_dtype": "auto",
            "enable_prefix_caching": "True",
            "num_gpu_blocks": str(o.kv_blocks),
            "engine": "0",
        }
        family = GaugeMetricFamily(
            "vllm:cache_config_info", "Information of the LLMEngine CacheConfig", labels=list(info)
        )
        family.add_metric(list(info.values()), 1.0)
        return family
