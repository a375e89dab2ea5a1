"""`vllm serve` command lines: one node, several nodes, adapters, KV events, keys."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from engine_flags import unknown_flags

from llmgw.engines import RUNTIME_LORA_ENV, EngineAdapter, EngineProfile, LaunchContext, vllm
from llmgw.engines.load import VLLM

_PROFILE = EngineProfile(
    name="h100x2",
    engine="vllm",
    gpu_class="h100-80g",
    tp=2,
    gpus_per_node=2,
    model_path="Qwen/Qwen3-8B",
    served_model_name="chat",
)
_CTX = LaunchContext(port=20001, host="10.0.0.5", gpus=("0", "1"))


def _value(argv: tuple[str, ...], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_one_node() -> None:
    launch = vllm.launch(
        _PROFILE, LaunchContext(port=20001, host="10.0.0.5", gpus=("0", "1"), model_path="/w/q")
    )
    assert launch.argv == (
        "vllm",
        "serve",
        "/w/q",
        "--host",
        "10.0.0.5",
        "--port",
        "20001",
        "--served-model-name",
        "chat",
        "--tensor-parallel-size",
        "2",
        "--pipeline-parallel-size",
        "1",
    )
    assert launch.env == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "0,1"}
    assert launch.metric_names is VLLM
    assert launch.metric_prefix == "vllm:"
    assert launch.enforces_api_key


def test_the_profile_source_is_loaded_when_the_agent_fetched_nothing() -> None:
    assert vllm.launch(_PROFILE, _CTX).argv[2] == "Qwen/Qwen3-8B"


def test_binary_override() -> None:
    assert (
        vllm.launch(_PROFILE, _CTX, binary="/opt/llmgw/engines/vllm-0.30.0/bin/vllm")
        .argv[0]
        .endswith("/vllm")
    )


def _two_nodes(rank: int) -> tuple[EngineProfile, LaunchContext]:
    profile = EngineProfile(
        name="2x8",
        engine="vllm",
        gpu_class="h100-80g",
        tp=8,
        pp=2,
        gpus_per_node=8,
        nodes=2,
        model_path="/w/big",
        served_model_name="big",
    )
    ctx = LaunchContext(
        port=20001,
        host="10.0.0.5" if rank == 0 else "10.0.0.6",
        dist_port=20002,
        gpus=tuple(str(i) for i in range(8)),
        node_rank=rank,
        master_address="10.0.0.5",
        node_address="10.0.0.5" if rank == 0 else "10.0.0.6",
        mgmt_interface="eth1",
    )
    return profile, ctx


def test_first_node_of_two_serves_and_leads_the_rendezvous() -> None:
    launch = vllm.launch(*_two_nodes(0))
    argv = launch.argv
    assert _value(argv, "--tensor-parallel-size") == "8"
    assert _value(argv, "--pipeline-parallel-size") == "2"
    assert _value(argv, "--distributed-executor-backend") == "mp"
    assert _value(argv, "--nnodes") == "2"
    assert _value(argv, "--node-rank") == "0"
    assert _value(argv, "--master-addr") == "10.0.0.5"
    assert _value(argv, "--master-port") == "20002"
    assert _value(argv, "--port") == "20001"
    assert "--headless" not in argv
    assert launch.serves_http
    assert launch.env["NCCL_SOCKET_IFNAME"] == "eth1"
    assert launch.env["GLOO_SOCKET_IFNAME"] == "eth1"
    assert launch.env["VLLM_HOST_IP"] == "10.0.0.5"


def test_other_nodes_run_headless_workers() -> None:
    profile, ctx = _two_nodes(1)
    launch = vllm.launch(profile, replace(ctx, port=0))
    argv = launch.argv
    assert "--headless" in argv
    assert "--host" not in argv
    assert "--port" not in argv
    assert _value(argv, "--node-rank") == "1"
    assert _value(argv, "--master-addr") == "10.0.0.5"
    assert not launch.serves_http
    assert launch.health_path == ""
    assert launch.metrics_path == ""
    assert launch.env["VLLM_HOST_IP"] == "10.0.0.6"


def test_profile_env_may_name_another_fabric_interface() -> None:
    profile, ctx = _two_nodes(0)
    profile = replace(profile, env={"NCCL_SOCKET_IFNAME": "ib0"})
    launch = vllm.launch(profile, ctx)
    assert launch.env["NCCL_SOCKET_IFNAME"] == "ib0"
    assert launch.env["GLOO_SOCKET_IFNAME"] == "eth1"


def test_one_node_sets_no_fabric() -> None:
    launch = vllm.launch(_PROFILE, LaunchContext(port=1, gpus=("0", "1"), mgmt_interface="eth1"))
    assert "NCCL_SOCKET_IFNAME" not in launch.env
    assert "--nnodes" not in launch.argv


def test_adapters_load_at_start_from_their_fetched_paths() -> None:
    profile = replace(
        _PROFILE, adapters=(EngineAdapter("sql", "org/sql-lora"), EngineAdapter("law", "org/law"))
    )
    ctx = LaunchContext(port=1, gpus=("0", "1"), adapter_paths={"sql": "/w/adapters/sql"})
    argv = vllm.launch(profile, ctx).argv
    assert "--enable-lora" in argv
    assert _value(argv, "--max-loras") == "2"
    at = argv.index("--lora-modules")
    assert argv[at + 1 : at + 3] == ("sql=/w/adapters/sql", "law=org/law")


def test_profile_max_loras_wins() -> None:
    profile = replace(_PROFILE, adapters=(EngineAdapter("sql", "/a"),), args=("--max-loras=4",))
    argv = vllm.launch(profile, _CTX).argv
    assert argv.count("--max-loras") == 0
    assert argv[-1] == "--max-loras=4"


def test_runtime_lora_loads_nothing_at_start_and_holds_the_cap() -> None:
    adapters = (EngineAdapter("sql", "/a"), EngineAdapter("law", "/b"))
    profile = replace(_PROFILE, adapters=adapters).with_runtime_lora(3)
    launch = vllm.launch(profile, _CTX)
    assert "--lora-modules" not in launch.argv
    assert _value(launch.argv, "--max-loras") == "3"
    assert _value(launch.argv, "--max-cpu-loras") == "3"
    assert launch.env[RUNTIME_LORA_ENV] == "True"


def test_kv_events_publish_on_the_replica_port_with_the_routers_hashing() -> None:
    profile = replace(_PROFILE, kv_events=True)
    launch = vllm.launch(
        profile, LaunchContext(port=20001, host="10.0.0.5", kv_events_port=20003, gpus=("0", "1"))
    )
    config = json.loads(_value(launch.argv, "--kv-events-config"))
    assert config == {"enable_kv_cache_events": True, "publisher": "zmq", "endpoint": "tcp://10.0.0.5:20003"}
    assert _value(launch.argv, "--prefix-caching-hash-algo") == "sha256_cbor"
    assert "--enable-prefix-caching" in launch.argv
    assert launch.env["PYTHONHASHSEED"] == vllm.KV_EVENTS_HASH_SEED


def test_kv_events_on_every_address_bind_the_wildcard() -> None:
    assert vllm.kv_events_config(LaunchContext(port=1, host="0.0.0.0", kv_events_port=9)).endswith(
        '"tcp://*:9"}'
    )


def test_without_kv_events_the_hash_seed_is_left_alone() -> None:
    launch = vllm.launch(_PROFILE, _CTX)
    assert "PYTHONHASHSEED" not in launch.env
    assert "--kv-events-config" not in launch.argv


def test_api_key_goes_in_the_environment_not_the_command_line() -> None:
    launch = vllm.launch(_PROFILE, LaunchContext(port=1, gpus=("0", "1"), api_key="sk-secret"))
    assert launch.env["VLLM_API_KEY"] == "sk-secret"
    assert not any("sk-secret" in word for word in launch.argv)


@pytest.mark.parametrize(
    ("args", "expected"),
    [((), ["--max-model-len", "32768"]), (("--max_model_len=8192",), [])],
)
def test_context_length_caps_the_model_length_unless_the_profile_does(
    args: tuple[str, ...], expected: list[str]
) -> None:
    profile = replace(_PROFILE, args=args)
    argv = vllm.launch(profile, LaunchContext(port=1, gpus=("0", "1"), context_length=32768)).argv
    own = list(argv[: len(argv) - len(args)])
    assert [w for w in own if w == "--max-model-len"] == expected[:1]
    if expected:
        assert _value(argv, "--max-model-len") == "32768"


def test_every_flag_is_one_vllm_takes() -> None:
    profile, ctx = _two_nodes(1)
    profile = replace(profile, kv_events=True, adapters=(EngineAdapter("a", "/a"),))
    ctx = replace(ctx, kv_events_port=20003, context_length=4096, api_key="k")
    launches = [
        vllm.launch(profile, ctx),
        vllm.launch(*_two_nodes(0)),
        vllm.launch(profile.with_runtime_lora(2), ctx),
    ]
    for launch in launches:
        assert unknown_flags("vllm", launch.argv) == []
