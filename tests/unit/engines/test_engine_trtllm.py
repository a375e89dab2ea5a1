"""`trtllm-serve` command lines: one node only, no key, its own metrics page."""

from __future__ import annotations

from dataclasses import replace

from engine_flags import unknown_flags

from llmgw.engines import EngineProfile, LaunchContext, trtllm

_PROFILE = EngineProfile(
    name="h100x4",
    engine="trtllm",
    gpu_class="h100-80g",
    tp=4,
    gpus_per_node=4,
    model_path="/w/llama-70b",
    served_model_name="big",
)
_CTX = LaunchContext(port=20001, host="127.0.0.1", gpus=("0", "1", "2", "3"), context_length=16384)


def test_one_node() -> None:
    launch = trtllm.launch(_PROFILE, _CTX)
    assert launch.argv == (
        "trtllm-serve",
        "/w/llama-70b",
        "--host",
        "127.0.0.1",
        "--port",
        "20001",
        "--served_model_name",
        "big",
        "--tp_size",
        "4",
        "--pp_size",
        "1",
        "--max_seq_len",
        "16384",
    )
    assert launch.metrics_path == "/prometheus/metrics"
    assert launch.metric_prefix == "trtllm_"


def test_no_key_can_be_required_so_the_agent_is_told() -> None:
    launch = trtllm.launch(_PROFILE, replace(_CTX, api_key="sk-secret"))
    assert not launch.enforces_api_key
    assert not any("sk-secret" in word for word in launch.argv)


def test_profile_sequence_length_wins() -> None:
    argv = trtllm.launch(replace(_PROFILE, args=("--max_seq_len", "4096")), _CTX).argv
    assert argv.count("--max_seq_len") == 1


def test_every_flag_is_one_trtllm_serve_takes() -> None:
    assert unknown_flags("trtllm", trtllm.launch(replace(_PROFILE, pp=2, tp=2), _CTX).argv) == []
