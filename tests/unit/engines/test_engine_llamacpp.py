"""`llama-server` command lines, checked against a real build's help: cards and cores,
slots and context, adapters, embeddings, keys, and stopping."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from engine_flags import FIXTURES, unknown_flags

from llmgw.engines import EngineAdapter, EngineProfile, LaunchContext, llamacpp
from llmgw.engines.load import LLAMACPP
from llmgw.errors import ConfigError

_GPU = EngineProfile(
    name="l4",
    engine="llamacpp",
    gpu_class="l4-24g",
    gpus_per_node=1,
    model_path="/w/qwen3-8b-q4_k_m.gguf",
    served_model_name="small",
)
_CPU = replace(_GPU, name="cpu", gpu_class="", gpus_per_node=0, cpu_cores=8)


def _value(argv: tuple[str, ...], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_one_card_holds_every_layer() -> None:
    launch = llamacpp.launch(_GPU, LaunchContext(port=20001, host="10.0.0.7", gpus=("1",)))
    assert launch.argv == (
        "llama-server",
        "--model",
        "/w/qwen3-8b-q4_k_m.gguf",
        "--host",
        "10.0.0.7",
        "--port",
        "20001",
        "--alias",
        "small",
        "--metrics",
        "--no-webui",
        "--parallel",
        "4",
        "--n-gpu-layers",
        "999",
    )
    assert launch.env["CUDA_VISIBLE_DEVICES"] == "1"
    assert launch.cpu_affinity == ()
    assert launch.metric_names is LLAMACPP
    assert launch.metric_names.kv_usage == ()
    assert launch.metric_prefix == "llamacpp:"


def test_several_cards_split_the_layers_evenly() -> None:
    profile = replace(_GPU, gpus_per_node=3)
    argv = llamacpp.launch(profile, LaunchContext(port=1, gpus=("0", "1", "2"))).argv
    assert _value(argv, "--split-mode") == "layer"
    assert _value(argv, "--tensor-split") == "1,1,1"


def test_profile_split_wins() -> None:
    profile = replace(_GPU, gpus_per_node=2, args=("--tensor-split", "3,1"))
    argv = llamacpp.launch(profile, LaunchContext(port=1, gpus=("0", "1"))).argv
    assert argv.count("--tensor-split") == 1
    assert "--split-mode" not in argv


def test_cpu_profile_offloads_nothing_and_threads_on_its_cores() -> None:
    cores = tuple(range(8, 16))
    launch = llamacpp.launch(_CPU, LaunchContext(port=1, cpu_cores=cores))
    argv = launch.argv
    assert _value(argv, "--device") == "none"
    assert _value(argv, "--n-gpu-layers") == "0"
    assert _value(argv, "--threads") == "8"
    assert launch.cpu_affinity == cores
    assert launch.env["CUDA_VISIBLE_DEVICES"] == ""


def test_profile_threads_win() -> None:
    argv = llamacpp.launch(replace(_CPU, args=("-t", "4")), LaunchContext(port=1, cpu_cores=(0, 1))).argv
    assert "--threads" not in argv


@pytest.mark.parametrize(
    ("args", "ctx_size", "parallel"),
    [
        ((), "32768", "4"),
        (("--parallel", "2"), "16384", None),
        (("-np=8",), "65536", None),
        (("--ctx-size", "4096"), None, "4"),
    ],
)
def test_context_pool_is_the_request_context_times_the_slots(
    args: tuple[str, ...], ctx_size: str | None, parallel: str | None
) -> None:
    argv = llamacpp.launch(
        replace(_GPU, args=args), LaunchContext(port=1, gpus=("0",), context_length=8192)
    ).argv
    own = argv[: len(argv) - len(args)]
    assert (_value(own, "--ctx-size") if "--ctx-size" in own else None) == ctx_size
    assert (_value(own, "--parallel") if "--parallel" in own else None) == parallel


def test_unknown_context_leaves_the_model_default() -> None:
    assert "--ctx-size" not in llamacpp.launch(_GPU, LaunchContext(port=1, gpus=("0",))).argv


def test_adapters_load_unapplied_and_are_numbered_in_load_order() -> None:
    profile = replace(_GPU, adapters=(EngineAdapter("sql", "org/sql"), EngineAdapter("law", "/w/law.gguf")))
    launch = llamacpp.launch(
        profile, LaunchContext(port=1, gpus=("0",), adapter_paths={"sql": "/w/sql.gguf"})
    )
    assert _value(launch.argv, "--lora") == "/w/sql.gguf,/w/law.gguf"
    assert "--lora-init-without-apply" in launch.argv
    assert launch.adapter_ids == {"sql": 0, "law": 1}


def test_adapter_path_with_a_comma_is_refused() -> None:
    profile = replace(_GPU, adapters=(EngineAdapter("sql", "/w/a,b.gguf"),))
    with pytest.raises(ConfigError, match=r"adapter 'sql' path '/w/a,b.gguf' has a comma"):
        llamacpp.launch(profile, LaunchContext(port=1, gpus=("0",)))


def test_embedding_model_serves_embeddings() -> None:
    assert "--embeddings" in llamacpp.launch(_GPU, LaunchContext(port=1, gpus=("0",), embeddings=True)).argv
    assert "--embeddings" not in llamacpp.launch(_GPU, LaunchContext(port=1, gpus=("0",))).argv


def test_api_key_goes_in_the_environment_llama_server_reads() -> None:
    launch = llamacpp.launch(_GPU, LaunchContext(port=1, gpus=("0",), api_key="sk-secret"))
    assert launch.env["LLAMA_API_KEY"] == "sk-secret"
    assert not any("sk-secret" in word for word in launch.argv)
    assert "(env: LLAMA_API_KEY)" in (FIXTURES / "llama-server-help.txt").read_text()


def test_stopping_kills_after_a_short_grace() -> None:
    launch = llamacpp.launch(_GPU, LaunchContext(port=1, gpus=("0",)))
    assert launch.kill_after_grace
    assert launch.stop_grace == timedelta(seconds=10)


def test_every_flag_is_one_llama_server_takes() -> None:
    profile = replace(_GPU, gpus_per_node=2, adapters=(EngineAdapter("a", "/a.gguf"),))
    launches = [
        llamacpp.launch(
            profile, LaunchContext(port=1, gpus=("0", "1"), context_length=4096, embeddings=True)
        ),
        llamacpp.launch(_CPU, LaunchContext(port=1, cpu_cores=(0, 1), api_key="k")),
    ]
    for launch in launches:
        assert unknown_flags("llamacpp", launch.argv) == []
