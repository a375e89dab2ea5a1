"""Reading a replica's load from its Prometheus `/metrics`, by engine.

The names come from llmgw.engines.metrics (each engine's own, vLLM's old and new KV
gauge both); the one present wins. llama-server publishes no KV figure at all: its
load is slots busy and requests deferred, and scoring does without KV there.

Only the few gauges routing needs are picked out of the text, with one regular
expression pass: a vLLM replica's page is tens of kilobytes of histograms that a full
Prometheus parse would spend milliseconds on, every scrape, for every replica.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from llmgw.engines.metrics import ANY, LLAMACPP, NAMES_BY_ENGINE, SGLANG, TRTLLM, VLLM, MetricNames


@dataclass(frozen=True, slots=True)
class EngineLoad:
    """What a replica last said about itself; None where it says nothing."""

    waiting: float | None = None
    running: float | None = None
    kv_usage: float | None = None


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


__all__ = [
    "ANY",
    "LLAMACPP",
    "NAMES_BY_ENGINE",
    "SGLANG",
    "TRTLLM",
    "VLLM",
    "EngineLoad",
    "MetricNames",
    "read_load",
]
