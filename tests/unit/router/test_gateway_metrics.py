"""The gateway's counters, exported through its own registry in Prometheus text; the
models' latency objectives and the TPOT histogram."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from llmgw.router.breaker import Breaker
from llmgw.router.endpoints import EndpointRegistry, EndpointSpec
from llmgw.router.metrics import (
    LATENCY_BUCKETS,
    OTHER_ROUTE,
    GatewayMetrics,
    Histogram,
    SloCollector,
    new_registry,
)
from llmgw.router.request import Kind
from llmgw.router.slo import Objective, SloTracker
from llmgw.upstream import UpstreamClient


def exported(metrics: GatewayMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    endpoints = EndpointRegistry(UpstreamClient(), failure_threshold=1, cooldown=10.0)
    endpoints.publish([EndpointSpec(id="a", url="http://127.0.0.1:1", models=("m",))])
    endpoint = endpoints.get("a")
    assert endpoint is not None
    endpoint.breaker = Breaker(1, 10.0)
    endpoint.breaker.failed(0.0)
    text = generate_latest(new_registry(metrics, endpoints, clock=lambda: 1.0)).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_every_counter_is_exported_with_its_labels() -> None:
    m = GatewayMetrics()
    m.answered(Kind.CHAT, "m", 200, 0.2)
    m.answered(Kind.CHAT, "m", 200, 0.3)
    m.answered(Kind.EMBEDDINGS, "m", 502, 1.0)
    m.served("/v1/models", 200)
    m.first_token("m", 0.05)
    m.counted_tokens("m", 10, 3)
    m.retried("m")
    m.fell_back("m", "backup")
    m.upstream_failed("a", "dial")
    m.stream_interrupted("m")
    m.usage_dropped = 4
    m.refused(OTHER_ROUTE, "", 404, "not_found")
    m.refused("/v1/chat/completions", "m", 503, "no_capacity")
    m.refused("/v1/chat/completions", "m", 503, "no_capacity")
    out = exported(m)

    def requests(model: str, reason: str, route: tuple[str, str], status: str) -> float:
        labels = (("model", model), ("reason", reason), route, ("status", status))
        return out[("llmgw_requests_total", labels)]

    chat = ("route", "/v1/chat/completions")
    assert requests("m", "", chat, "200") == 2
    embeddings = ("route", "/v1/embeddings")
    assert requests("m", "", embeddings, "502") == 1
    models = ("route", "/v1/models")
    assert requests("", "", models, "200") == 1
    other = ("route", "other")
    assert requests("", "not_found", other, "404") == 1
    assert requests("m", "no_capacity", chat, "503") == 2
    assert out[("llmgw_request_duration_seconds_count", (("model", "m"),))] == 3
    assert out[("llmgw_request_duration_seconds_sum", (("model", "m"),))] == 1.5
    assert out[("llmgw_time_to_first_token_seconds_count", (("model", "m"),))] == 1
    assert out[("llmgw_tokens_total", (("kind", "prompt"), ("model", "m")))] == 10
    assert out[("llmgw_tokens_total", (("kind", "completion"), ("model", "m")))] == 3
    assert out[("llmgw_retries_total", (("model", "m"),))] == 1
    assert out[("llmgw_fallbacks_total", (("fallback", "backup"), ("model", "m")))] == 1
    assert out[("llmgw_upstream_failures_total", (("endpoint", "a"), ("reason", "dial")))] == 1
    assert out[("llmgw_stream_interruptions_total", (("model", "m"),))] == 1
    assert out[("llmgw_usage_queue_dropped_total", ())] == 4
    assert out[("llmgw_endpoint_breaker_open", (("endpoint", "a"),))] == 1.0
    assert out[("llmgw_endpoint_inflight", (("endpoint", "a"),))] == 0


def test_histogram_buckets_are_cumulative_and_end_at_inf() -> None:
    h = Histogram()
    for value in (0.001, 0.02, 0.02, 400.0):
        h.observe(value)
    buckets = dict(h.cumulative())
    assert buckets[repr(float(LATENCY_BUCKETS[0]))] == 1
    assert buckets["0.025"] == 3
    assert buckets[repr(float(LATENCY_BUCKETS[-1]))] == 3
    assert buckets["+Inf"] == 4
    assert h.count == 4


def test_each_models_objective_is_exported_by_measure() -> None:
    slo = SloTracker(
        {
            "both": Objective(ttft_p99=2.0, tpot_p99=0.1),
            "ttft-only": Objective(ttft_p99=1.5, tpot_p99=0.0),
            "none": Objective(ttft_p99=0.0, tpot_p99=0.0),
        }
    )
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SloCollector(slo))
    samples = {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        for s in family.samples
    }
    assert samples == {
        (("measure", "ttft"), ("model", "both")): 2.0,
        (("measure", "tpot"), ("model", "both")): 0.1,
        (("measure", "ttft"), ("model", "ttft-only")): 1.5,
    }


def test_tpot_is_a_histogram_by_model() -> None:
    m = GatewayMetrics()
    m.per_output_token("m", 0.02)
    m.per_output_token("m", 0.04)
    out = exported(m)
    assert out[("llmgw_time_per_output_token_seconds_count", (("model", "m"),))] == 2
    assert out[("llmgw_time_per_output_token_seconds_bucket", (("le", "0.025"), ("model", "m")))] == 1
