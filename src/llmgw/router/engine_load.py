"""Reading a replica's load from its Prometheus `/metrics`, by engine.

Each engine names its queue, its running batch and its KV-cache use differently, and
vLLM renamed its KV gauge (`gpu_cache_usage_perc` became `kv_cache_usage_perc`), so
both names are read and the one present wins. llama-server publishes no KV figure at
all: its load is slots busy and requests deferred, and scoring does without KV there.

Only the few gauges routing needs are picked out of the text, with one regular
expression pass: a vLLM replica's page is tens of kilobytes of histograms that a full
Prometheus parse would spend milliseconds on, every scrape, for every replica.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class EngineLoad:
    """What a replica last said about itself; None where it says nothing."""

    waiting: float | None = None
    running: float | None = None
    kv_usage: float | None = None


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

NAMES_BY_ENGINE: dict[str, MetricNames] = {
    "": VLLM,
    "vllm": VLLM,
    "llamacpp": LLAMACPP,
    "sglang": SGLANG,
    "trtllm": VLLM,
    "sim": ANY,
}

_SAMPLE = re.compile(rb"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{[^}]*\})?[ \t]+(\S+)", re.MULTILINE)


def read_load(text: bytes, names: MetricNames) -> EngineLoad:
    """The load in a `/metrics` page. Queue and batch sizes are summed over their
    series (an engine serving several models, or running several engine cores, reports
    one each); the KV-cache share is a fraction, so the fullest series stands for it."""
    wanted = names.wanted
    kv_names = names.kv_wanted
    sums: dict[str, float] = {}
    for match in _SAMPLE.finditer(text):
        name = match.group(1)
        if name not in wanted:
            continue
        try:
            value = float(match.group(2))
        except ValueError:
            continue
        if math.isnan(value):
            continue
        key = name.decode()
        if name in kv_names:
            sums[key] = max(sums.get(key, 0.0), value)
        else:
            sums[key] = sums.get(key, 0.0) + value

    def first(candidates: tuple[str, ...]) -> float | None:
        for candidate in candidates:
            if candidate in sums:
                return sums[candidate]
        return None

    kv = first(names.kv_usage)
    return EngineLoad(
        waiting=first(names.waiting),
        running=first(names.running),
        kv_usage=None if kv is None else min(max(kv, 0.0), 1.0),
    )
