"""The gateway's Prometheus metrics, in a registry of its own (no process globals).

Served at `/metrics` on `admin_listen` and on `metrics_listen`. Label children are
cached per label tuple, because looking a child up in prometheus_client costs more
than the increment itself and the request path does it several times a request.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from llmgw.router.endpoints import EndpointRegistry

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


class GatewayMetrics:
    """Counters and histograms of the request path."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self._requests = Counter(
            "llmgw_requests",
            "Requests answered, by model and HTTP status.",
            ["model", "status"],
            registry=registry,
        )
        self._latency = Histogram(
            "llmgw_request_duration_seconds",
            "Time from the request's arrival to the end of its answer.",
            ["model"],
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
        self._ttft = Histogram(
            "llmgw_time_to_first_token_seconds",
            "Time from a streamed request's arrival to its first bytes of answer.",
            ["model"],
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
        self._tokens = Counter(
            "llmgw_tokens",
            "Tokens, by model and kind (prompt, completion).",
            ["model", "kind"],
            registry=registry,
        )
        self._retries = Counter(
            "llmgw_retries", "Tries on a further replica after one failed.", ["model"], registry=registry
        )
        self._fallbacks = Counter(
            "llmgw_fallbacks",
            "Requests answered by a fallback model.",
            ["model", "fallback"],
            registry=registry,
        )
        self._upstream_failures = Counter(
            "llmgw_upstream_failures",
            "Failed tries on a replica, by endpoint and reason.",
            ["endpoint", "reason"],
            registry=registry,
        )
        self._stream_errors = Counter(
            "llmgw_stream_interruptions",
            "Streams that broke after they began and ended with an error event.",
            ["model"],
            registry=registry,
        )
        self._cache: dict[tuple[str, ...], Callable[..., None]] = {}

    def _child(self, key: tuple[str, ...], make: Callable[[], Callable[..., None]]) -> Callable[..., None]:
        bound = self._cache.get(key)
        if bound is None:
            bound = self._cache[key] = make()
        return bound

    def answered(self, model: str, status: int, seconds: float) -> None:
        self._child(("req", model, str(status)), lambda: self._requests.labels(model, str(status)).inc)()
        self._child(("lat", model), lambda: self._latency.labels(model).observe)(seconds)

    def first_token(self, model: str, seconds: float) -> None:
        self._child(("ttft", model), lambda: self._ttft.labels(model).observe)(seconds)

    def tokens(self, model: str, prompt: int, completion: int) -> None:
        self._child(("tp", model), lambda: self._tokens.labels(model, "prompt").inc)(prompt)
        self._child(("tc", model), lambda: self._tokens.labels(model, "completion").inc)(completion)

    def retried(self, model: str) -> None:
        self._child(("retry", model), lambda: self._retries.labels(model).inc)()

    def fell_back(self, model: str, fallback: str) -> None:
        self._child(("fb", model, fallback), lambda: self._fallbacks.labels(model, fallback).inc)()

    def upstream_failed(self, endpoint: str, reason: str) -> None:
        self._child(("uf", endpoint, reason), lambda: self._upstream_failures.labels(endpoint, reason).inc)()

    def stream_interrupted(self, model: str) -> None:
        self._child(("si", model), lambda: self._stream_errors.labels(model).inc)()


class EndpointCollector(Collector):
    """Endpoint state read at scrape time: in flight, scraped load, breaker state."""

    def __init__(self, endpoints: EndpointRegistry, clock: Callable[[], float]) -> None:
        self._endpoints = endpoints
        self._clock = clock

    def collect(self) -> list[GaugeMetricFamily]:
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
            "1 while the endpoint's breaker keeps it out of routing (open), 0.5 half-open, 0 closed.",
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
        return [inflight, waiting, running, kv, breaker]

    def describe(self) -> list[GaugeMetricFamily]:
        return []
