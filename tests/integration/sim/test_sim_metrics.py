"""Each flavor's `/metrics` and engine endpoints over HTTP, parsed with Prometheus' parser."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sim_http_helpers import FAST, get_json, get_text, post_json

from llmgw.testing.sim import SimEngineProcess, start_sim_engine

CHAT = {"model": "m", "messages": [{"role": "user", "content": "count to ten"}], "max_tokens": 5}


def scrape(sim: SimEngineProcess) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of `/metrics`, keyed by name and sorted labels."""
    text = get_text(sim.url + "/metrics")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def sample(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str) -> float:
    return sum(v for (n, labels), v in samples.items() if n == name and "le" not in dict(labels))


@pytest.fixture(scope="module")
def llamacpp_sim() -> Iterator[SimEngineProcess]:
    with start_sim_engine(*FAST, "--flavor", "llamacpp", "--model", "m", "--max-seqs", "3") as sim:
        yield sim


@pytest.fixture(scope="module")
def sglang_sim() -> Iterator[SimEngineProcess]:
    with start_sim_engine(*FAST, "--flavor", "sglang", "--model", "m") as sim:
        yield sim


def test_vllm_metrics_move_with_traffic(vllm_sim: SimEngineProcess) -> None:
    before = scrape(vllm_sim)
    answer = post_json(vllm_sim.url + "/v1/chat/completions", {**CHAT, "model": "sim-model"})
    after = scrape(vllm_sim)
    labels = (("engine", "0"), ("model_name", "sim-model"))
    assert ("vllm:num_requests_running", labels) in after
    assert ("vllm:kv_cache_usage_perc", labels) in after
    prompt = answer["usage"]["prompt_tokens"]
    for name, grew in [
        ("vllm:prompt_tokens_total", prompt),
        ("vllm:generation_tokens_total", 5),
        ("vllm:prefix_cache_queries_total", prompt),
        ("vllm:time_to_first_token_seconds_count", 1),
        ("vllm:e2e_request_latency_seconds_count", 1),
        ("vllm:inter_token_latency_seconds_count", 4),
    ]:
        assert sample(after, name) - sample(before, name) == grew, name
    assert sample(after, "vllm:prefix_cache_hits_total") >= sample(before, "vllm:prefix_cache_hits_total")


def test_vllm_tokenize_detokenize_and_version(vllm_sim: SimEngineProcess) -> None:
    answer = post_json(vllm_sim.url + "/tokenize", {"model": "sim-model", "prompt": "Hello there, friend"})
    assert answer["count"] == 4
    assert answer["max_model_len"] == 8192
    assert post_json(vllm_sim.url + "/detokenize", {"tokens": answer["tokens"]}) == {
        "prompt": "Hello there, friend"
    }
    assert "version" in get_json(vllm_sim.url + "/version")
    assert post_json(vllm_sim.url + "/reset_prefix_cache", {}) is None


def test_vllm_legacy_names_replace_the_renamed_ones() -> None:
    with start_sim_engine(*FAST, "--legacy-metrics") as sim:
        names = {name for name, _ in scrape(sim)}
    assert "vllm:gpu_cache_usage_perc" in names
    assert "vllm:gpu_prefix_cache_queries_total" in names
    assert "vllm:kv_cache_usage_perc" not in names
    assert "vllm:prefix_cache_queries_total" not in names


def test_llamacpp_metrics_slots_props_and_health(llamacpp_sim: SimEngineProcess) -> None:
    before = scrape(llamacpp_sim)
    post_json(llamacpp_sim.url + "/v1/chat/completions", CHAT)
    after = scrape(llamacpp_sim)
    assert (
        sample(after, "llamacpp:tokens_predicted_total") - sample(before, "llamacpp:tokens_predicted_total")
        == 5
    )
    assert sample(after, "llamacpp:prompt_tokens_total") > sample(before, "llamacpp:prompt_tokens_total")
    for name in (
        "llamacpp:requests_processing",
        "llamacpp:requests_deferred",
        "llamacpp:n_busy_slots_per_decode_total",
    ):
        assert (name, ()) in after, name
    assert not any("kv_cache" in name for name, _ in after)
    slots = get_json(llamacpp_sim.url + "/slots")
    assert [s["id"] for s in slots] == [0, 1, 2]
    assert not any(s["is_processing"] for s in slots)
    props = get_json(llamacpp_sim.url + "/props")
    assert props["total_slots"] == 3
    assert props["default_generation_settings"]["n_ctx"] == 8192
    assert get_json(llamacpp_sim.url + "/health") == {"status": "ok"}
    assert post_json(llamacpp_sim.url + "/tokenize", {"content": "Hello there"})["tokens"]


def test_sglang_metrics_and_model_info(sglang_sim: SimEngineProcess) -> None:
    before = scrape(sglang_sim)
    post_json(sglang_sim.url + "/v1/chat/completions", CHAT)
    after = scrape(sglang_sim)
    scheduler = (("engine_type", "unified"), ("model_name", "m"), ("pp_rank", "0"), ("tp_rank", "0"))
    assert ("sglang:num_running_reqs", scheduler) in after
    assert ("sglang:num_queue_reqs", scheduler) in after
    assert ("sglang:token_usage", scheduler) in after
    assert (
        sample(after, "sglang:generation_tokens_total") - sample(before, "sglang:generation_tokens_total")
        == 5
    )
    assert sample(after, "sglang:time_to_first_token_seconds_count") == 1
    assert get_json(sglang_sim.url + "/get_model_info")["model_path"] == "m"


def test_an_endpoint_of_another_flavor_is_not_served(llamacpp_sim: SimEngineProcess) -> None:
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(llamacpp_sim.url + "/version", timeout=5)
    caught.value.close()
    assert caught.value.code == 404
