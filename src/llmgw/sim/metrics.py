"""`GET /metrics`: the engine's state in the exposition format of the flavor it imitates.

The router reads replicas' load from these metrics, so the sim serves the names, types
and labels the real engines' current releases serve (each flavor's module cites its
sources), and `--legacy-metrics` serves vLLM's pre-0.9 names so the router's handling
of renamed metrics can be tested. Rendering happens at scrape time from `EngineStats`
totals and a snapshot of the scheduler, never on the request path.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric

from llmgw.sim.stats import EngineStats, Timing

# The classic text format every engine serves; scrapers of all ages read it.
TEXT_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass(frozen=True, slots=True)
class EngineSnapshot:
    """The scheduler's gauges at the moment of a scrape."""

    now: float
    running: int
    waiting: int
    kv_used_blocks: int
    kv_capacity_blocks: int
    cached_blocks: int


class MetricsRenderer(Protocol):
    """One flavor's exposition: which timings it needs, and how it writes them."""

    @property
    def buckets(self) -> Mapping[Timing, Sequence[float]]: ...

    def render(self, stats: EngineStats, snapshot: EngineSnapshot) -> bytes: ...


class _Families:
    """A collector that yields the families handed to it for one scrape."""

    def __init__(self) -> None:
        self.families: list[Metric] = []

    def collect(self) -> Iterable[Metric]:
        return list(self.families)


class FamilyWriter:
    """Writes metric families with prometheus_client, from a registry of this server's own."""

    def __init__(self) -> None:
        self._collector = _Families()
        self._registry = CollectorRegistry(auto_describe=False)
        self._registry.register(self._collector)

    def write(self, families: list[Metric]) -> bytes:
        """The text exposition of `families`."""
        self._collector.families = families
        try:
            return bytes(generate_latest(self._registry))
        finally:
            self._collector.families = []
