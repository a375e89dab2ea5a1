"""The gateway's Prometheus metrics, counted in plain dictionaries and exported when
scraped.

prometheus_client's own counters take a lock and look up a label child on every
increment, which on the request path cost more than the work being counted. Here the
request path adds to dictionaries (one event loop, no lock needed) and a collector
turns them into metric families at scrape time, in the registry the gateway owns (no
process globals). Served at `/metrics` on `admin_listen` and on `metrics_listen`.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from llmgw.router.endpoints import EndpointRegistry
from llmgw.router.request import Kind

if TYPE_CHECKING:
    from llmgw.router.canary import Canaries
    from llmgw.router.flow import FlowControl
    from llmgw.router.response_cache import ResponseCache
    from llmgw.router.slo import SloTracker

MODEL_ROUTE = "/v1/models/{model}"
"""The route label of a request for one model's entry."""
OTHER_ROUTE = "other"
"""The route label of a request whose path is no route (answered 404)."""
BEFORE_ROUTE = ""
"""The route label of a request the HTTP server refused before the application saw it."""

# A replica's answer is counted under its request's Kind (a str that hashes as one, at
# no cost on the request path) and named by its route when scraped.
_KIND_ROUTES: dict[str, str] = {kind: kind.path.decode() for kind in Kind}

LATENCY_BUCKETS: tuple[float, ...] = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
    30,
    60,
    120,
    300,
)


@dataclass(slots=True)
class Histogram:
    """Bucket counts (non-cumulative), sum and count of observations."""

    buckets: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS) + 1))
    total: float = 0.0
    count: int = 0

    def observe(self, value: float) -> None:
        self.buckets[bisect.bisect_left(LATENCY_BUCKETS, value)] += 1
        self.total += value
        self.count += 1

    def cumulative(self) -> list[tuple[str, float]]:
        out: list[tuple[str, float]] = []
        running = 0
        for bound, count in zip((*LATENCY_BUCKETS, float("inf")), self.buckets, strict=True):
            running += count
            out.append(("+Inf" if bound == float("inf") else repr(float(bound)), float(running)))
        return out


class GatewayMetrics:
    """What the request path counts; exported by `GatewayCollector`."""

    def __init__(self) -> None:
        # Answers by route (its template: ROUTES, a mount's prefix, "other" for a path
        # that is no route, "" for a request refused before its path was read), model
        # and status: a replica's answers, and the gateway's own that are no refusal
        # (the model list, health).
        self.requests: dict[tuple[str, str, int], int] = {}
        # Answers the gateway made itself (a refusal, or no replica could answer), by
        # route, model ("" before one is resolved: a client's name is no label), status
        # and reason (llmgw.http.responses.REASONS). Apart from `requests` so that the
        # replica's answers, the usual case, count without a fourth key part.
        self.refusals: dict[tuple[str, str, int, str], int] = {}
        self.latency: dict[str, Histogram] = {}
        self.ttft: dict[str, Histogram] = {}
        self.tpot: dict[str, Histogram] = {}
        self.tokens: dict[tuple[str, str], int] = {}
        self.retries: dict[str, int] = {}
        self.fallbacks: dict[tuple[str, str], int] = {}
        self.upstream_failures: dict[tuple[str, str], int] = {}
        self.stream_interruptions: dict[str, int] = {}
        self.usage_dropped = 0

    def answered(self, route: str, model: str, status: int, seconds: float) -> None:
        key = (route, model, status)
        self.requests[key] = self.requests.get(key, 0) + 1
        histogram = self.latency.get(model)
        if histogram is None:
            histogram = self.latency[model] = Histogram()
        histogram.observe(seconds)

    def served(self, route: str, status: int) -> None:
        """An answer the gateway made itself that is no refusal and concerns no model
        (the model list, health, a CORS preflight): counted, with no latency."""
        key = (route, "", status)
        self.requests[key] = self.requests.get(key, 0) + 1

    def refused(self, route: str, model: str, status: int, reason: str) -> None:
        key = (route, model, status, reason)
        self.refusals[key] = self.refusals.get(key, 0) + 1

    def first_token(self, model: str, seconds: float) -> None:
        histogram = self.ttft.get(model)
        if histogram is None:
            histogram = self.ttft[model] = Histogram()
        histogram.observe(seconds)

    def per_output_token(self, model: str, seconds: float) -> None:
        """A streamed answer's time per output token after the first (off the request
        path: from the usage its replica reported)."""
        histogram = self.tpot.get(model)
        if histogram is None:
            histogram = self.tpot[model] = Histogram()
        histogram.observe(seconds)

    def counted_tokens(self, model: str, prompt: int, completion: int) -> None:
        for kind, amount in (("prompt", prompt), ("completion", completion)):
            key = (model, kind)
            self.tokens[key] = self.tokens.get(key, 0) + amount

    def retried(self, model: str) -> None:
        self.retries[model] = self.retries.get(model, 0) + 1

    def fell_back(self, model: str, fallback: str) -> None:
        key = (model, fallback)
        self.fallbacks[key] = self.fallbacks.get(key, 0) + 1

    def upstream_failed(self, endpoint: str, reason: str) -> None:
        key = (endpoint, reason)
        self.upstream_failures[key] = self.upstream_failures.get(key, 0) + 1

    def stream_interrupted(self, model: str) -> None:
        self.stream_interruptions[model] = self.stream_interruptions.get(model, 0) + 1


def _counter(
    name: str, doc: str, labels: list[str], values: Iterable[tuple[Sequence[str], int]]
) -> CounterMetricFamily:
    family = CounterMetricFamily(name, doc, labels=labels)
    for key, value in values:
        family.add_metric(list(key), value)
    return family


def _histograms(name: str, doc: str, values: dict[str, Histogram]) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, doc, labels=["model"])
    for model, histogram in values.items():
        family.add_metric([model], histogram.cumulative(), histogram.total)
    return family


class GatewayCollector(Collector):
    """Exports `GatewayMetrics` and the endpoints' live state at scrape time."""

    def __init__(
        self, metrics: GatewayMetrics, endpoints: EndpointRegistry, clock: Callable[[], float]
    ) -> None:
        self._metrics = metrics
        self._endpoints = endpoints
        self._clock = clock

    def collect(self) -> Iterator[Metric]:
        m = self._metrics
        requests = _counter(
            "llmgw_requests",
            "Responses on the client port, by route, model, HTTP status (499: the client left) "
            "and reason: empty for an answer that is no refusal, else why the gateway answered "
            "itself (bad_request, unauthorized, not_found, rate_limited, no_capacity, "
            "upstream_error, bad_http, ...); model is empty when the request named none the "
            "gateway serves, route when the request was refused before its path was read.",
            ["route", "model", "status", "reason"],
            (
                ((_KIND_ROUTES.get(route, route), model, str(status), ""), n)
                for (route, model, status), n in m.requests.items()
            ),
        )
        for (route, model, status, reason), n in m.refusals.items():
            requests.add_metric([route, model, str(status), reason], n)
        yield requests
        yield _histograms(
            "llmgw_request_duration_seconds",
            "Time from a request's arrival to the end of its answer.",
            m.latency,
        )
        yield _histograms(
            "llmgw_time_to_first_token_seconds",
            "Time from a streamed request's arrival to the first bytes of its answer.",
            m.ttft,
        )
        yield _histograms(
            "llmgw_time_per_output_token_seconds",
            "A streamed answer's time per output token after the first: from its first bytes to "
            "its end, over its completion tokens less one (answers that reported their usage).",
            m.tpot,
        )
        yield _counter(
            "llmgw_tokens",
            "Tokens, by model and kind (prompt, completion).",
            ["model", "kind"],
            m.tokens.items(),
        )
        yield _counter(
            "llmgw_retries",
            "Tries on a further replica after one failed.",
            ["model"],
            (((k,), v) for k, v in m.retries.items()),
        )
        yield _counter(
            "llmgw_fallbacks",
            "Requests answered by a fallback model.",
            ["model", "fallback"],
            m.fallbacks.items(),
        )
        yield _counter(
            "llmgw_upstream_failures",
            "Failed tries on a replica, by endpoint and reason (llmgw.http.responses."
            "UPSTREAM_FAILURE_REASONS: dial, dial_timeout, status, closed, idle_timeout, ...).",
            ["endpoint", "reason"],
            m.upstream_failures.items(),
        )
        yield _counter(
            "llmgw_stream_interruptions",
            "Streams that broke after they began and ended with an error event.",
            ["model"],
            (((k,), v) for k, v in m.stream_interruptions.items()),
        )
        # Not llmgw_usage_records_dropped: that is the auth store's buffer (auth.buffer_size),
        # and a family may appear once on a page.
        dropped = CounterMetricFamily(
            "llmgw_usage_queue_dropped",
            "Usage records dropped because the gateway's accounting queue was full.",
        )
        dropped.add_metric([], m.usage_dropped)
        yield dropped
        yield from self._endpoint_state()

    def _endpoint_state(self) -> Iterator[Metric]:
        now = self._clock()
        inflight = GaugeMetricFamily(
            "llmgw_endpoint_inflight",
            "Requests this gateway has in flight at the endpoint.",
            labels=["endpoint"],
        )
        waiting = GaugeMetricFamily(
            "llmgw_endpoint_waiting", "Requests the endpoint last reported queued.", labels=["endpoint"]
        )
        running = GaugeMetricFamily(
            "llmgw_endpoint_running", "Requests the endpoint last reported running.", labels=["endpoint"]
        )
        kv = GaugeMetricFamily(
            "llmgw_endpoint_kv_usage", "KV-cache use the endpoint last reported, 0 to 1.", labels=["endpoint"]
        )
        breaker = GaugeMetricFamily(
            "llmgw_endpoint_breaker_open",
            "1 while the endpoint's breaker keeps it out of routing, 0.5 half-open, 0 closed.",
            labels=["endpoint"],
        )
        for endpoint in self._endpoints.all():
            eid = endpoint.id
            inflight.add_metric([eid], endpoint.inflight)
            if endpoint.load.waiting is not None:
                waiting.add_metric([eid], endpoint.load.waiting)
            if endpoint.load.running is not None:
                running.add_metric([eid], endpoint.load.running)
            if endpoint.load.kv_usage is not None:
                kv.add_metric([eid], endpoint.load.kv_usage)
            state = endpoint.breaker.state(now)
            breaker.add_metric([eid], {"closed": 0.0, "half_open": 0.5}.get(state, 1.0))
        yield from (inflight, waiting, running, kv, breaker)

    def describe(self) -> Iterator[Metric]:
        return iter(())


class FlowCollector(Collector):
    """Admission's queues and decisions, by model and band, at scrape time."""

    def __init__(self, flow: FlowControl) -> None:
        self._flow = flow

    def collect(self) -> Iterator[Metric]:
        counts = self._flow.counts
        depth = GaugeMetricFamily(
            "llmgw_admission_queue_depth", "Requests waiting to be admitted.", labels=["model", "band"]
        )
        for model, flow in self._flow.models():
            for band, queue in flow.queues.items():
                depth.add_metric([model, band], len(queue))
        yield depth
        starting = GaugeMetricFamily(
            "llmgw_admission_activation_waiting",
            "Requests waiting for a model with no replica to get one (router.activation_wait).",
            labels=["model"],
        )
        for model, waiting in self._flow.activating.items():
            starting.add_metric([model], waiting)
        yield starting
        for name, doc, table in (
            ("llmgw_admission_admitted", "Requests admitted, at once or after waiting.", counts.admitted),
            ("llmgw_admission_queued", "Requests that had to wait to be admitted.", counts.queued),
            ("llmgw_admission_expired", "Requests refused after waiting past queue_ttl.", counts.expired),
            ("llmgw_admission_shed", "Requests turned away because a queue was full.", counts.shed),
        ):
            yield _counter(name, doc, ["model", "band"], table.items())
        waits = HistogramMetricFamily(
            "llmgw_admission_wait_seconds",
            "Time admitted requests waited in a queue.",
            labels=["model", "band"],
        )
        for (model, band), histogram in counts.waited.items():
            waits.add_metric([model, band], histogram.cumulative(), histogram.total)
        yield waits

    def describe(self) -> Iterator[Metric]:
        return iter(())


class SloCollector(Collector):
    """Each model's latency objective (`slo` in the catalog), for alerts that compare the
    latency histograms with it."""

    def __init__(self, slo: SloTracker) -> None:
        self._slo = slo

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "llmgw_slo_objective_seconds",
            "Each model's p99 latency objective (slo.ttft_p99, slo.tpot_p99), by measure (ttft, "
            "tpot); a model without one has no series.",
            labels=["model", "measure"],
        )
        for model, objective in self._slo.objectives.items():
            if objective.ttft_p99 > 0:
                family.add_metric([model, "ttft"], objective.ttft_p99)
            if objective.tpot_p99 > 0:
                family.add_metric([model, "tpot"], objective.tpot_p99)
        yield family

    def describe(self) -> Iterator[Metric]:
        return iter(())


class CanaryCollector(Collector):
    """Each canary's split in force, both sides' figures over its window, and its
    rollbacks (llmgw.router.canary)."""

    def __init__(self, canaries: Canaries) -> None:
        self._canaries = canaries

    def collect(self) -> Iterator[Metric]:
        labels = ["model", "candidate"]
        percent = GaugeMetricFamily(
            "llmgw_canary_percent",
            "The share of the model's requests sent to its candidate now (0 once rolled back).",
            labels=labels,
        )
        errors = GaugeMetricFamily(
            "llmgw_canary_error_rate",
            "Share of tries failed by the replicas (5xx, timeouts, broken streams) over the canary's "
            "window, by side (model, candidate).",
            labels=[*labels, "side"],
        )
        ttft = GaugeMetricFamily(
            "llmgw_canary_ttft_mean_seconds",
            "Mean time to the first byte of an answer over the canary's window, by side.",
            labels=[*labels, "side"],
        )
        tries = GaugeMetricFamily(
            "llmgw_canary_window_requests",
            "Tries in the canary's window, by side.",
            labels=[*labels, "side"],
        )
        for canary, model, candidate in self._canaries.figures():
            names = [canary.model, canary.candidate]
            percent.add_metric(names, canary.percent)
            for side, figures in (("model", model), ("candidate", candidate)):
                tries.add_metric([*names, side], figures.requests)
                errors.add_metric([*names, side], figures.error_rate)
                mean = figures.mean_ttft_s
                if mean is not None:
                    ttft.add_metric([*names, side], mean)
        yield from (percent, errors, ttft, tries)
        yield _counter(
            "llmgw_canary_rollbacks",
            "Candidates rolled back automatically, by reason (error_rate, ttft).",
            ["model", "candidate", "reason"],
            self._canaries.rollbacks.items(),
        )

    def describe(self) -> Iterator[Metric]:
        return iter(())


class CacheCollector(Collector):
    """The response cache's hits, misses, evictions and size (llmgw.router.response_cache)."""

    def __init__(self, cache: ResponseCache) -> None:
        self._cache = cache

    def collect(self) -> Iterator[Metric]:
        cache = self._cache
        stats = cache.stats
        for name, doc, value in (
            ("hits", "Requests answered from the response cache.", stats.hits),
            ("misses", "Cacheable requests the response cache did not hold.", stats.misses),
            ("evictions", "Entries evicted to make room (router.cache.max_bytes).", stats.evictions),
            ("stored", "Answers kept by the response cache.", stats.stored),
            ("too_large", "Answers larger than router.cache.max_entry_bytes, not kept.", stats.too_large),
        ):
            family = CounterMetricFamily(f"llmgw_response_cache_{name}", doc)
            family.add_metric([], value)
            yield family
        size = GaugeMetricFamily("llmgw_response_cache_bytes", "Bytes the response cache holds now.")
        size.add_metric([], cache.size_bytes)
        yield size
        entries = GaugeMetricFamily("llmgw_response_cache_entries", "Entries the response cache holds now.")
        entries.add_metric([], len(cache))
        yield entries

    def describe(self) -> Iterator[Metric]:
        return iter(())


def new_registry(
    metrics: GatewayMetrics, endpoints: EndpointRegistry, clock: Callable[[], float]
) -> CollectorRegistry:
    """A registry holding the gateway's metrics (and nothing from the process globals)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(GatewayCollector(metrics, endpoints, clock))
    return registry
