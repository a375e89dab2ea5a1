"""Reading a replica's load from its `/metrics` page, by engine: vLLM (both names of its
KV gauge), llama.cpp (no KV figure), SGLang, and the sim (any of them). Pages are
written as the engines write them: HELP and TYPE comments, label sets, histograms."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmgw.engines.load import (
    ANY,
    LLAMACPP,
    NAMES_BY_ENGINE,
    SGLANG,
    TRTLLM,
    VLLM,
    EngineLoad,
    MetricNames,
    read_load,
)

_LABELS = 'engine="0",model_name="Qwen/Qwen3-8B"'

VLLM_PAGE = f"""\
# HELP python_gc_objects_collected_total Objects collected during gc
# TYPE python_gc_objects_collected_total counter
python_gc_objects_collected_total{{generation="0"}} 12345.0
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{{_LABELS}}} 7.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{{_LABELS}}} 3.0
# HELP vllm:num_requests_waiting_by_reason Number of requests waiting, by reason.
# TYPE vllm:num_requests_waiting_by_reason gauge
vllm:num_requests_waiting_by_reason{{{_LABELS},reason="capacity"}} 2.0
vllm:num_requests_waiting_by_reason{{{_LABELS},reason="deferred"}} 1.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{{_LABELS}}} 0.4231
# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{{{_LABELS}}} 98304.0
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{{{_LABELS},le="0.001"}} 0.0
vllm:time_to_first_token_seconds_bucket{{{_LABELS},le="0.1"}} 52.0
vllm:time_to_first_token_seconds_bucket{{{_LABELS},le="+Inf"}} 60.0
vllm:time_to_first_token_seconds_count{{{_LABELS}}} 60.0
vllm:time_to_first_token_seconds_sum{{{_LABELS}}} 4.83
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{{block_size="16",cache_dtype="auto",enable_prefix_caching="True",engine="0"}} 1.0
""".encode()

# vLLM before the rename: the KV gauge was gpu_cache_usage_perc, with swapped requests too.
VLLM_OLD_PAGE = b"""\
# HELP vllm:num_requests_running Number of requests currently running on GPU.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="meta-llama/Llama-3.1-8B-Instruct"} 4.0
# HELP vllm:num_requests_swapped Number of requests swapped to CPU.
# TYPE vllm:num_requests_swapped gauge
vllm:num_requests_swapped{model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0
# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.87
# HELP vllm:cpu_cache_usage_perc CPU KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:cpu_cache_usage_perc gauge
vllm:cpu_cache_usage_perc{model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.5
# HELP vllm:e2e_request_latency_seconds Histogram of end to end request latency in seconds.
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{le="1.0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 3.0
vllm:e2e_request_latency_seconds_bucket{le="+Inf",model_name="meta-llama/Llama-3.1-8B-Instruct"} 9.0
vllm:e2e_request_latency_seconds_count{model_name="meta-llama/Llama-3.1-8B-Instruct"} 9.0
vllm:e2e_request_latency_seconds_sum{model_name="meta-llama/Llama-3.1-8B-Instruct"} 17.5
"""

LLAMACPP_PAGE = b"""\
# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 4096
# HELP llamacpp:prompt_seconds_total Prompt process time
# TYPE llamacpp:prompt_seconds_total counter
llamacpp:prompt_seconds_total 1.25
# HELP llamacpp:tokens_predicted_total Number of generation tokens processed.
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 812
# HELP llamacpp:n_decode_total Total number of llama_decode() calls
# TYPE llamacpp:n_decode_total counter
llamacpp:n_decode_total 800
# HELP llamacpp:kv_cache_usage_ratio KV-cache usage. 1 means 100 percent usage.
# TYPE llamacpp:kv_cache_usage_ratio gauge
llamacpp:kv_cache_usage_ratio 0.61
# HELP llamacpp:requests_processing Number of requests processing.
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 2
# HELP llamacpp:requests_deferred Number of requests deferred.
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 5
"""

SGLANG_PAGE = b"""\
# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="Qwen/Qwen3-8B",tp_rank="0"} 12.0
# HELP sglang:num_used_tokens The number of used tokens.
# TYPE sglang:num_used_tokens gauge
sglang:num_used_tokens{model_name="Qwen/Qwen3-8B",tp_rank="0"} 40960.0
# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="Qwen/Qwen3-8B",tp_rank="0"} 0.37
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="Qwen/Qwen3-8B",tp_rank="0"} 4.0
# HELP sglang:cache_hit_rate The prefix cache hit rate.
# TYPE sglang:cache_hit_rate gauge
sglang:cache_hit_rate{model_name="Qwen/Qwen3-8B",tp_rank="0"} 0.8
# HELP sglang:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_bucket{le="0.1",model_name="Qwen/Qwen3-8B"} 10.0
sglang:time_to_first_token_seconds_bucket{le="+Inf",model_name="Qwen/Qwen3-8B"} 25.0
sglang:time_to_first_token_seconds_sum{model_name="Qwen/Qwen3-8B"} 3.2
sglang:time_to_first_token_seconds_count{model_name="Qwen/Qwen3-8B"} 25.0
"""

PAGE_CASES = [
    pytest.param(VLLM_PAGE, VLLM, EngineLoad(waiting=3.0, running=7.0, kv_usage=0.4231), id="vllm"),
    pytest.param(
        VLLM_OLD_PAGE, VLLM, EngineLoad(waiting=0.0, running=4.0, kv_usage=0.87), id="vllm-old-kv-name"
    ),
    pytest.param(LLAMACPP_PAGE, LLAMACPP, EngineLoad(waiting=5.0, running=2.0, kv_usage=None), id="llamacpp"),
    pytest.param(SGLANG_PAGE, SGLANG, EngineLoad(waiting=4.0, running=12.0, kv_usage=0.37), id="sglang"),
    pytest.param(VLLM_PAGE, ANY, EngineLoad(waiting=3.0, running=7.0, kv_usage=0.4231), id="sim-as-vllm"),
    pytest.param(
        LLAMACPP_PAGE, ANY, EngineLoad(waiting=5.0, running=2.0, kv_usage=None), id="sim-as-llamacpp"
    ),
    pytest.param(SGLANG_PAGE, ANY, EngineLoad(waiting=4.0, running=12.0, kv_usage=0.37), id="sim-as-sglang"),
    pytest.param(LLAMACPP_PAGE, VLLM, EngineLoad(), id="vllm-names-on-a-llamacpp-page"),
    pytest.param(VLLM_PAGE, SGLANG, EngineLoad(), id="sglang-names-on-a-vllm-page"),
    pytest.param(b"", VLLM, EngineLoad(), id="empty-page"),
    pytest.param(b"<html><body>404 Not Found</body></html>\n", VLLM, EngineLoad(), id="not-a-metrics-page"),
]


@pytest.mark.parametrize(("page", "names", "expected"), PAGE_CASES)
def test_the_load_in_a_metrics_page(page: bytes, names: MetricNames, expected: EngineLoad) -> None:
    assert read_load(page, names) == expected


def test_llamacpp_load_has_no_kv_figure_even_when_the_page_has_one() -> None:
    # llama-server's kv_cache_usage_ratio is not part of its load for routing.
    assert b"llamacpp:kv_cache_usage_ratio" in LLAMACPP_PAGE
    assert read_load(LLAMACPP_PAGE, LLAMACPP).kv_usage is None


def test_the_new_kv_name_wins_when_both_are_present() -> None:
    page = (
        b'vllm:gpu_cache_usage_perc{model_name="m"} 0.9\n'
        b'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.2\n'
    )
    assert read_load(page, VLLM).kv_usage == 0.2
    # The order on the page does not matter.
    assert read_load(b"\n".join(reversed(page.splitlines())), VLLM).kv_usage == 0.2


SAMPLE_CASES = [
    pytest.param(b"vllm:num_requests_waiting 6\n", 6.0, id="no-labels"),
    pytest.param(b"vllm:num_requests_waiting{} 6\n", 6.0, id="empty-label-set"),
    pytest.param(b'vllm:num_requests_waiting{model_name="m"} 6 1718000000000\n', 6.0, id="with-timestamp"),
    pytest.param(b"vllm:num_requests_waiting\t6.0\n", 6.0, id="tab-separated"),
    pytest.param(b"vllm:num_requests_waiting 6e0\r\n", 6.0, id="exponent-and-crlf"),
    pytest.param(
        b'vllm:num_requests_waiting{model_name="my model, v2"} 6\n', 6.0, id="label-with-space-comma"
    ),
    pytest.param(
        b'vllm:num_requests_waiting{model_name="a"} 2\nvllm:num_requests_waiting{model_name="b"} 3\n',
        5.0,
        id="summed-across-models",
    ),
    pytest.param(
        b'vllm:num_requests_waiting{model_name="a"} NaN\nvllm:num_requests_waiting{model_name="b"} 4\n',
        4.0,
        id="nan-ignored",
    ),
    pytest.param(b"vllm:num_requests_waiting NaN\n", None, id="only-nan-is-nothing"),
    pytest.param(b"vllm:num_requests_waiting many\n", None, id="unreadable-value-ignored"),
    pytest.param(b"# vllm:num_requests_waiting 6\n", None, id="comment-is-not-a-sample"),
    pytest.param(b"# HELP vllm:num_requests_waiting Waiting 6\n", None, id="help-line-is-not-a-sample"),
    pytest.param(b"vllm:num_requests_waiting_total 6\n", None, id="longer-name-is-another-metric"),
    pytest.param(b"xvllm:num_requests_waiting 6\n", None, id="name-must-match-whole"),
    pytest.param(b'vllm:num_requests_waiting_bucket{le="1"} 6\n', None, id="histogram-bucket"),
]


@pytest.mark.parametrize(("page", "waiting"), SAMPLE_CASES)
def test_how_a_sample_line_is_read(page: bytes, waiting: float | None) -> None:
    assert read_load(page, VLLM).waiting == waiting


KV_CLAMP_CASES = [
    pytest.param(b"1.2", 1.0, id="over-one"),
    pytest.param(b"-0.1", 0.0, id="negative"),
    pytest.param(b"+Inf", 1.0, id="infinite"),
    pytest.param(b"1", 1.0, id="full"),
    pytest.param(b"0", 0.0, id="empty"),
]


@pytest.mark.parametrize(("value", "kv"), KV_CLAMP_CASES)
def test_kv_usage_is_held_between_zero_and_one(value: bytes, kv: float) -> None:
    assert read_load(b"vllm:kv_cache_usage_perc " + value + b"\n", VLLM).kv_usage == kv


def test_only_nan_kv_reads_as_no_figure() -> None:
    assert read_load(b"vllm:kv_cache_usage_perc NaN\n", VLLM).kv_usage is None


ENGINE_CASES = [
    pytest.param("", VLLM, id="unnamed-is-vllm"),
    pytest.param("vllm", VLLM, id="vllm"),
    pytest.param("trtllm", TRTLLM, id="trtllm-reads-nothing-yet"),
    pytest.param("llamacpp", LLAMACPP, id="llamacpp"),
    pytest.param("sglang", SGLANG, id="sglang"),
    pytest.param("sim", ANY, id="sim"),
]


@pytest.mark.parametrize(("engine", "names"), ENGINE_CASES)
def test_each_engine_reads_its_own_names(engine: str, names: MetricNames) -> None:
    assert NAMES_BY_ENGINE[engine] is names


def test_the_wanted_set_is_every_name_of_every_part() -> None:
    assert VLLM.wanted == {
        b"vllm:num_requests_waiting",
        b"vllm:num_requests_running",
        b"vllm:kv_cache_usage_perc",
        b"vllm:gpu_cache_usage_perc",
    }
    assert ANY.wanted == VLLM.wanted | LLAMACPP.wanted | SGLANG.wanted


_gauge = st.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False)


@settings(max_examples=100, deadline=None, derandomize=True, database=None)
@given(values=st.lists(_gauge, min_size=1, max_size=6))
def test_waiting_and_running_are_summed_over_every_series(values: list[float]) -> None:
    # One series per served model (or per engine core): the replica's queue is all of them.
    lines = [f'sglang:num_queue_reqs{{model_name="m{i}"}} {v!r}' for i, v in enumerate(values)]
    lines += [f'sglang:num_running_reqs{{model_name="m{i}"}} {v!r}' for i, v in enumerate(values)]
    load = read_load("\n".join(lines).encode(), SGLANG)
    assert load.waiting is not None
    assert load.running is not None
    assert math.isclose(load.waiting, math.fsum(values), rel_tol=1e-9, abs_tol=1e-9)
    assert math.isclose(load.running, math.fsum(values), rel_tol=1e-9, abs_tol=1e-9)


def test_kv_usage_of_several_engine_cores_is_not_their_sum() -> None:
    page = b"""\
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 1.0
vllm:num_requests_waiting{engine="1",model_name="m"} 2.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.45
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.40
"""
    load = read_load(page, VLLM)
    assert load.waiting == 3.0  # queues add up
    assert load.kv_usage is not None
    # A fraction of each core's own cache: the replica's is within the range of its cores.
    assert 0.40 <= load.kv_usage <= 0.45
