"""SGLang server command lines: one node, several nodes, embeddings, keys."""

from __future__ import annotations

from dataclasses import replace

from engine_flags import unknown_flags

from llmgw.engines import EngineProfile, LaunchContext, sglang
from llmgw.engines.load import SGLANG

_PROFILE = EngineProfile(
    name="a100x2",
    engine="sglang",
    gpu_class="a100-80g",
    tp=2,
    gpus_per_node=2,
    model_path="/w/llama",
    served_model_name="chat",
)
_CTX = LaunchContext(port=20001, host="10.0.0.5", gpus=("0", "1"))


def _value(argv: tuple[str, ...], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_one_node() -> None:
    launch = sglang.launch(_PROFILE, _CTX, binary="/opt/sglang/bin/python")
    assert launch.argv == (
        "/opt/sglang/bin/python",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "/w/llama",
        "--host",
        "10.0.0.5",
        "--port",
        "20001",
        "--served-model-name",
        "chat",
        "--tp-size",
        "2",
        "--enable-metrics",
    )
    assert launch.metric_names is SGLANG
    assert launch.metric_prefix == "sglang:"


def test_pipeline_stages() -> None:
    profile = replace(_PROFILE, tp=1, pp=2)
    assert _value(sglang.launch(profile, _CTX).argv, "--pp-size") == "2"


def test_two_nodes_meet_at_the_first() -> None:
    profile = replace(_PROFILE, tp=16, gpus_per_node=8, nodes=2)
    for rank in (0, 1):
        ctx = LaunchContext(
            port=20001,
            gpus=tuple(str(i) for i in range(8)),
            node_rank=rank,
            master_address="10.0.0.5",
            dist_port=20002,
            mgmt_interface="eth1",
            api_key="sk-secret",
        )
        launch = sglang.launch(profile, ctx)
        assert _value(launch.argv, "--dist-init-addr") == "10.0.0.5:20002"
        assert _value(launch.argv, "--nnodes") == "2"
        assert _value(launch.argv, "--node-rank") == str(rank)
        assert launch.serves_http == (rank == 0)
        assert ("--api-key" in launch.argv) == (rank == 0)
        assert launch.env["NCCL_SOCKET_IFNAME"] == "eth1"


def test_embedding_model_and_context_length() -> None:
    argv = sglang.launch(_PROFILE, replace(_CTX, embeddings=True, context_length=8192)).argv
    assert "--is-embedding" in argv
    assert _value(argv, "--context-length") == "8192"


def test_every_flag_is_one_sglang_takes() -> None:
    profile = replace(_PROFILE, tp=8, pp=2, gpus_per_node=8, nodes=2)
    ctx = LaunchContext(
        port=1,
        gpus=tuple(str(i) for i in range(8)),
        master_address="h",
        dist_port=2,
        api_key="k",
        embeddings=True,
        context_length=4096,
    )
    argv = sglang.launch(profile, ctx).argv
    assert argv[1:3] == ("-m", "sglang.launch_server")
    assert unknown_flags("sglang", argv[3:]) == []
