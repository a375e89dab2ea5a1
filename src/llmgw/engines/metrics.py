"""The metric names each engine publishes for the parts of its load routing reads.

Each engine names its queue, its running batch and its KV-cache use differently, and
vLLM renamed its KV gauge (`gpu_cache_usage_perc` became `kv_cache_usage_perc`), so
both names are listed, newest first. llama-server publishes no KV figure at all. The
engine modules say which of these their replicas serve; the router's scraper reads
them (llmgw.engines.load).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class MetricNames:
    """The gauges one engine publishes for each part of its load, newest name first."""

    waiting: tuple[str, ...]
    running: tuple[str, ...]
    kv_usage: tuple[str, ...]
    wanted: frozenset[bytes] = field(init=False, repr=False, compare=False)
    kv_wanted: frozenset[bytes] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names = (*self.waiting, *self.running, *self.kv_usage)
        object.__setattr__(self, "wanted", frozenset(n.encode() for n in names))
        object.__setattr__(self, "kv_wanted", frozenset(n.encode() for n in self.kv_usage))


VLLM = MetricNames(
    waiting=("vllm:num_requests_waiting",),
    running=("vllm:num_requests_running",),
    kv_usage=("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
)
LLAMACPP = MetricNames(
    waiting=("llamacpp:requests_deferred",),
    running=("llamacpp:requests_processing",),
    kv_usage=(),
)
SGLANG = MetricNames(
    waiting=("sglang:num_queue_reqs",),
    running=("sglang:num_running_reqs",),
    kv_usage=("sglang:token_usage",),
)
# The sim serves whichever engine's names its flavour imitates.
ANY = MetricNames(
    waiting=VLLM.waiting + LLAMACPP.waiting + SGLANG.waiting,
    running=VLLM.running + LLAMACPP.running + SGLANG.running,
    kv_usage=VLLM.kv_usage + SGLANG.kv_usage,
)

# TensorRT-LLM publishes its own trtllm_* family at /prometheus/metrics, none of which
# is read yet: its replicas are scored by this gateway's in-flight count alone.
TRTLLM = MetricNames(waiting=(), running=(), kv_usage=())

NAMES_BY_ENGINE: dict[str, MetricNames] = {
    "": VLLM,
    "vllm": VLLM,
    "llamacpp": LLAMACPP,
    "sglang": SGLANG,
    "trtllm": TRTLLM,
    "sim": ANY,
}
