"""The dashboard's Traffic page: the gateway's own counters (llmgw.router.metrics, the
same ones /metrics exports) summed per model, read in place with no scrape."""

from __future__ import annotations

from dataclasses import dataclass

from llmgw.router.metrics import LATENCY_BUCKETS, GatewayMetrics, Histogram


@dataclass(frozen=True)
class TrafficRow:
    model: str
    requests: int
    errors: int
    """Answers with status 400 or above: refusals, upstream failures, clients that left."""
    ttft_mean_ms: float | None
    ttft_p90_ms: float | None
    """The upper bound of the bucket holding the 90th percentile (as Prometheus's
    histogram_quantile would bound it); None past the last bucket or with no stream."""
    prompt_tokens: int
    completion_tokens: int


def _quantile_bound(histogram: Histogram, q: float) -> float | None:
    wanted = q * histogram.count
    running = 0
    for bound, count in zip(LATENCY_BUCKETS, histogram.buckets, strict=False):
        running += count
        if running >= wanted:
            return bound
    return None


def traffic_rows(metrics: GatewayMetrics) -> list[TrafficRow]:
    """One row per model that has had a request, by name."""
    requests: dict[str, int] = {}
    errors: dict[str, int] = {}
    for (_, model, status), n in metrics.requests.items():
        if model:
            requests[model] = requests.get(model, 0) + n
            if status >= 400:
                errors[model] = errors.get(model, 0) + n
    for (_, model, _, _), n in metrics.refusals.items():
        if model:
            requests[model] = requests.get(model, 0) + n
            errors[model] = errors.get(model, 0) + n
    rows = []
    for model in sorted({*requests, *metrics.ttft, *(m for m, _ in metrics.tokens)}):
        ttft = metrics.ttft.get(model)
        counted = ttft is not None and ttft.count > 0
        p90 = _quantile_bound(ttft, 0.9) if ttft is not None and counted else None
        rows.append(
            TrafficRow(
                model=model,
                requests=requests.get(model, 0),
                errors=errors.get(model, 0),
                ttft_mean_ms=round(ttft.total / ttft.count * 1000, 1)
                if ttft is not None and counted
                else None,
                ttft_p90_ms=None if p90 is None else p90 * 1000,
                prompt_tokens=metrics.tokens.get((model, "prompt"), 0),
                completion_tokens=metrics.tokens.get((model, "completion"), 0),
            )
        )
    return rows
