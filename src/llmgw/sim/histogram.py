"""A Prometheus-style histogram small enough to observe on every token.

prometheus_client's own Histogram takes a lock and walks its buckets per observation;
the sim observes inter-token latency on every token of every stream, so it keeps plain
counts here and hands them to the exposition code at scrape time.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable


class Histogram:
    """Counts of observations per upper bound (`le`), plus their sum."""

    __slots__ = ("_counts", "bounds", "count", "total")

    def __init__(self, bounds: Iterable[float]) -> None:
        self.bounds: tuple[float, ...] = tuple(sorted(float(b) for b in bounds))
        self._counts = [0] * (len(self.bounds) + 1)
        self.count = 0
        self.total = 0.0

    def observe(self, value: float) -> None:
        """Record one observation."""
        # bisect_left puts a value equal to a bound in that bound's bucket (le is inclusive).
        self._counts[bisect_left(self.bounds, value)] += 1
        self.count += 1
        self.total += value

    def cumulative(self) -> list[tuple[float, int]]:
        """(upper bound, observations at or below it), ending with +Inf."""
        out: list[tuple[float, int]] = []
        running = 0
        for bound, n in zip((*self.bounds, float("inf")), self._counts, strict=True):
            running += n
            out.append((bound, running))
        return out


def one_two_five(max_value: int) -> list[int]:
    """1, 2, 5, 10, 20, 50, ... up to `max_value`: vLLM's buckets for token counts."""
    out: list[int] = []
    exponent = 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10**exponent
            if value > max_value:
                return out
            out.append(value)
        exponent += 1


def format_bound(bound: float) -> str:
    """A bucket bound as Prometheus text writes it (`0.5`, `10.0`, `+Inf`)."""
    if bound == float("inf"):
        return "+Inf"
    return repr(float(bound))


def as_buckets(histogram: Histogram) -> list[tuple[str, float]]:
    """The histogram in the shape prometheus_client's HistogramMetricFamily takes."""
    return [(format_bound(b), float(n)) for b, n in histogram.cumulative()]
