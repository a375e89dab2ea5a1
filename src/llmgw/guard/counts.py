"""What the guardrails did, counted for the metrics: checks run by policy, check,
stage, action and verdict, and how long judges took."""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

JUDGE_BUCKETS_S: tuple[float, ...] = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

CLEAN = "clean"
HIT = "hit"
ERROR = "error"


@dataclass(slots=True)
class JudgeLatency:
    counts: list[int] = field(default_factory=lambda: [0] * (len(JUDGE_BUCKETS_S) + 1))
    total_s: float = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(JUDGE_BUCKETS_S, seconds)] += 1
        self.total_s += seconds


@dataclass(slots=True)
class GuardCounts:
    checks: dict[tuple[str, str, str, str, str], int] = field(default_factory=dict)
    judges: dict[str, JudgeLatency] = field(default_factory=dict)

    def add(self, policy: str, check: str, stage: str, action: str, verdict: str) -> None:
        key = (policy, check, stage, action, verdict)
        self.checks[key] = self.checks.get(key, 0) + 1

    def judged(self, model: str, seconds: float) -> None:
        latency = self.judges.get(model)
        if latency is None:
            latency = self.judges[model] = JudgeLatency()
        latency.observe(seconds)


class GuardCollector(Collector):
    """`llmgw_guard_checks_total` and `llmgw_guard_judge_seconds`, at scrape time."""

    def __init__(self, counts: GuardCounts) -> None:
        self._counts = counts

    def collect(self) -> Iterator[Metric]:
        checks = CounterMetricFamily(
            "llmgw_guard_checks",
            "Guard checks run, by policy, check, stage, action and verdict (clean, hit, error).",
            labels=["policy", "check", "stage", "action", "verdict"],
        )
        for labels, value in list(self._counts.checks.items()):
            checks.add_metric(list(labels), value)
        yield checks
        judges = HistogramMetricFamily(
            "llmgw_guard_judge_seconds", "How long guard judge models took to answer.", labels=["model"]
        )
        for model, latency in list(self._counts.judges.items()):
            running = 0
            buckets: list[tuple[str, float]] = []
            for bound, count in zip((*JUDGE_BUCKETS_S, float("inf")), latency.counts, strict=True):
                running += count
                buckets.append(("+Inf" if bound == float("inf") else repr(bound), running))
            judges.add_metric([model], buckets, latency.total_s)
        yield judges

    def describe(self) -> Iterator[Metric]:
        return iter(())
