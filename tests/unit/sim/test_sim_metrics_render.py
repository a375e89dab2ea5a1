"""Each flavor's exposition, read back with Prometheus' own parser."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from llmgw.sim.engine import renderer_for
from llmgw.sim.histogram import Histogram, format_bound, one_two_five
from llmgw.sim.metrics import EngineSnapshot
from llmgw.sim.options import Flavor, SimOptions
from llmgw.sim.scheduler import Job
from llmgw.sim.stats import EngineStats

SNAPSHOT = EngineSnapshot(
    now=10.0, running=3, waiting=2, kv_used_blocks=25, kv_capacity_blocks=100, cached_blocks=40
)


def render(flavor: Flavor, legacy: bool = False, snapshot: EngineSnapshot = SNAPSHOT) -> dict[str, Any]:
    options = SimOptions(flavor=flavor, legacy_metrics=legacy, models=("m1",))
    renderer = renderer_for(options)
    stats = EngineStats(renderer.buckets)
    job = Job(id=1, prompt_tokens=40, block_hashes=(), output_tokens=3, arrived_at=0.0)
    job.admitted_at, job.cached_tokens = 0.1, 16
    stats.admitted(job, 0.1)
    stats.preempted(job, 0.2)
    for i, at in enumerate((0.3, 0.35, 0.4), start=1):
        job.emitted = i
        stats.token(job, at, 2)
        job.first_token_at = 0.3
        job.last_token_at = at
    stats.finished(job, 0.4)
    text = renderer.render(stats, snapshot).decode()
    return {family.name: family for family in text_string_to_metric_families(text)}


def value(families: dict[str, Any], family: str, sample: str | None = None) -> float:
    found = families[family]
    samples = found.samples
    return float(next(s.value for s in samples if s.name == (sample or family)))


VLLM_CURRENT = {
    "vllm:num_requests_running": "gauge",
    "vllm:num_requests_waiting": "gauge",
    "vllm:kv_cache_usage_perc": "gauge",
    "vllm:prefix_cache_queries": "counter",
    "vllm:prefix_cache_hits": "counter",
    "vllm:prompt_tokens": "counter",
    "vllm:generation_tokens": "counter",
    "vllm:request_success": "counter",
    "vllm:time_to_first_token_seconds": "histogram",
    "vllm:inter_token_latency_seconds": "histogram",
    "vllm:e2e_request_latency_seconds": "histogram",
    "vllm:request_queue_time_seconds": "histogram",
}


def test_vllm_serves_the_current_names_types_and_labels() -> None:
    families = render(Flavor.VLLM)
    for name, kind in VLLM_CURRENT.items():
        assert families[name].type == kind, name
    running = families["vllm:num_requests_running"].samples[0]
    assert running.labels == {"model_name": "m1", "engine": "0"}
    assert running.value == 3
    assert value(families, "vllm:num_requests_waiting") == 2
    assert value(families, "vllm:kv_cache_usage_perc") == 0.25
    assert value(families, "vllm:prefix_cache_queries", "vllm:prefix_cache_queries_total") == 40
    assert value(families, "vllm:prefix_cache_hits", "vllm:prefix_cache_hits_total") == 16
    assert value(families, "vllm:prompt_tokens", "vllm:prompt_tokens_total") == 40
    assert value(families, "vllm:generation_tokens", "vllm:generation_tokens_total") == 3
    assert value(families, "vllm:num_preemptions", "vllm:num_preemptions_total") == 1
    assert value(families, "vllm:time_to_first_token_seconds", "vllm:time_to_first_token_seconds_count") == 1
    assert value(families, "vllm:inter_token_latency_seconds", "vllm:inter_token_latency_seconds_count") == 2
    assert "vllm:gpu_cache_usage_perc" not in families
    reasons = {s.labels["finished_reason"]: s.value for s in families["vllm:request_success"].samples}
    assert reasons == {"stop": 0, "length": 1, "abort": 0}


def test_vllm_legacy_serves_the_pre_0_9_names_instead() -> None:
    families = render(Flavor.VLLM, legacy=True)
    assert value(families, "vllm:gpu_cache_usage_perc") == 0.25
    assert value(families, "vllm:gpu_prefix_cache_hits", "vllm:gpu_prefix_cache_hits_total") == 16
    assert "vllm:time_per_output_token_seconds" in families
    for renamed in ("vllm:kv_cache_usage_perc", "vllm:prefix_cache_hits", "vllm:inter_token_latency_seconds"):
        assert renamed not in families


def test_llamacpp_serves_its_unlabelled_family_and_no_kv_cache_metric() -> None:
    families = render(Flavor.LLAMACPP)
    expected = {
        "llamacpp:prompt_tokens": "counter",
        "llamacpp:prompt_seconds": "counter",
        "llamacpp:tokens_predicted": "counter",
        "llamacpp:tokens_predicted_seconds": "counter",
        "llamacpp:n_decode": "counter",
        "llamacpp:n_tokens_max": "counter",
        "llamacpp:n_busy_slots_per_decode": "counter",
        "llamacpp:prompt_tokens_seconds": "gauge",
        "llamacpp:predicted_tokens_seconds": "gauge",
        "llamacpp:requests_processing": "gauge",
        "llamacpp:requests_deferred": "gauge",
    }
    assert {name: f.type for name, f in families.items()} == expected
    assert all(not s.labels for f in families.values() for s in f.samples)
    # llama-server counts only the prompt tokens it processed: the cached 16 are not.
    assert value(families, "llamacpp:prompt_tokens", "llamacpp:prompt_tokens_total") == 24
    assert value(families, "llamacpp:tokens_predicted", "llamacpp:tokens_predicted_total") == 3
    assert value(families, "llamacpp:requests_processing") == 3
    assert value(families, "llamacpp:requests_deferred") == 2
    assert value(families, "llamacpp:n_busy_slots_per_decode", "llamacpp:n_busy_slots_per_decode_total") == 2
    assert value(families, "llamacpp:predicted_tokens_seconds") == pytest.approx(3 / 0.1)
    assert not any("kv_cache" in name for name in families)


def test_llamacpp_writes_names_exactly_as_llama_server_does() -> None:
    options = SimOptions(flavor=Flavor.LLAMACPP)
    renderer = renderer_for(options)
    text = renderer.render(EngineStats(renderer.buckets), SNAPSHOT).decode()
    assert "# TYPE llamacpp:n_tokens_max counter\nllamacpp:n_tokens_max 0\n" in text
    assert "llamacpp:prompt_tokens_total 0\n" in text


def test_sglang_serves_scheduler_gauges_and_tokenizer_counters() -> None:
    families = render(Flavor.SGLANG)
    running = families["sglang:num_running_reqs"].samples[0]
    assert running.labels == {"engine_type": "unified", "model_name": "m1", "pp_rank": "0", "tp_rank": "0"}
    assert running.value == 3
    assert value(families, "sglang:num_queue_reqs") == 2
    assert value(families, "sglang:token_usage") == 0.25
    assert value(families, "sglang:cache_hit_rate") == pytest.approx(16 / 40)
    assert value(families, "sglang:prompt_tokens", "sglang:prompt_tokens_total") == 40
    assert value(families, "sglang:generation_tokens", "sglang:generation_tokens_total") == 3
    cached = families["sglang:cached_tokens"].samples[0]
    assert cached.labels == {"model_name": "m1", "cache_source": "device"}
    assert families["sglang:time_to_first_token_seconds"].type == "histogram"
    assert families["sglang:e2e_request_latency_seconds"].type == "histogram"


def test_histogram_buckets_are_cumulative_and_inclusive() -> None:
    histogram = Histogram([0.1, 0.5])
    for v in (0.1, 0.2, 0.7):
        histogram.observe(v)
    assert histogram.cumulative() == [(0.1, 1), (0.5, 2), (float("inf"), 3)]
    assert histogram.total == pytest.approx(1.0)
    assert format_bound(float("inf")) == "+Inf"
    assert format_bound(5) == "5.0"


def test_one_two_five_buckets_stop_at_the_maximum() -> None:
    assert one_two_five(100) == [1, 2, 5, 10, 20, 50, 100]
    assert one_two_five(8192)[-1] == 5000
