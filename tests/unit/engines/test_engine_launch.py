"""What every launch shares: the dispatch by engine, the context checks, the ports a
replica takes, the reading of a profile's own flags and the layering of environments."""

from __future__ import annotations

from datetime import timedelta

import pytest

from llmgw.engines import EngineAdapter, EngineProfile, LaunchContext, PortNeeds, ports_needed
from llmgw.engines.launch import flag_of, layered_env, profile_sets, profile_value
from llmgw.engines.launchers import LAUNCHERS, launch_for
from llmgw.engines.load import NAMES_BY_ENGINE
from llmgw.errors import ConfigError


def _profile(engine: str, **changes: object) -> EngineProfile:
    base: dict[str, object] = {
        "name": "p",
        "engine": engine,
        "gpu_class": "" if engine in ("llamacpp", "sim") else "h100-80g",
        "tp": 1,
        "gpus_per_node": 0 if engine in ("llamacpp", "sim") else 1,
        "nodes": 1,
        "model_path": "/weights/m",
        "served_model_name": "chat",
        "startup_timeout": timedelta(minutes=7),
    }
    base.update(changes)
    return EngineProfile(**base)  # type: ignore[arg-type]


def _ctx(**changes: object) -> LaunchContext:
    base: dict[str, object] = {"port": 20001, "gpus": ("0",)}
    base.update(changes)
    return LaunchContext(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize("engine", ["vllm", "llamacpp", "sglang", "trtllm", "sim"])
def test_every_engine_launches_with_its_metric_names_and_timeout(engine: str) -> None:
    launch = launch_for(_profile(engine), _ctx())
    assert launch.engine == engine
    assert launch.metric_names is NAMES_BY_ENGINE[engine]
    assert launch.startup_timeout == timedelta(minutes=7)
    assert launch.serves_http
    assert launch.health_path == "/health"
    assert launch.kill_after_grace
    assert launch.stop_grace > timedelta(0)
    assert launch.ready


@pytest.mark.parametrize("engine", ["vllm", "llamacpp", "sglang", "trtllm", "sim"])
def test_profile_args_come_last_unchanged(engine: str) -> None:
    args = ("--some-flag", "x", "--other=1")
    launch = launch_for(_profile(engine, args=args), _ctx())
    assert launch.argv[-3:] == args


@pytest.mark.parametrize("engine", ["vllm", "llamacpp", "sglang", "trtllm", "sim"])
def test_replica_sees_only_its_cards_numbered_as_nvidia_smi_numbers_them(engine: str) -> None:
    profile = _profile(engine, gpus_per_node=2, tp=2 if engine != "llamacpp" else 1)
    launch = launch_for(profile, _ctx(gpus=("2", "5")))
    assert launch.env["CUDA_VISIBLE_DEVICES"] == "2,5"
    assert launch.env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"


def test_comfyui_is_refused_naming_the_engine_and_what_runs() -> None:
    with pytest.raises(ConfigError) as err:
        launch_for(_profile("comfyui"), _ctx())
    message = str(err.value)
    assert "'chat'" in message
    assert "profile 'p'" in message
    assert "cannot start engine comfyui" in message
    assert all(engine in message for engine in LAUNCHERS)


def test_context_state_dir_is_the_working_directory_and_cores_the_affinity() -> None:
    launch = launch_for(_profile("llamacpp"), _ctx(gpus=(), cpu_cores=(4, 5), state_dir="/var/lib/r1"))
    assert launch.cwd == "/var/lib/r1"
    assert launch.cpu_affinity == (4, 5)


@pytest.mark.parametrize(
    ("engine", "profile_changes", "ctx_changes", "says"),
    [
        ("vllm", {}, {"gpus": ()}, "needs GPUs and the context assigns none"),
        ("sglang", {}, {"gpus": ()}, "needs GPUs and the context assigns none"),
        ("trtllm", {}, {"gpus": ()}, "needs GPUs and the context assigns none"),
        (
            "vllm",
            {"gpus_per_node": 2, "tp": 2},
            {"gpus": ("0",)},
            "gpus_per_node is 2 and the context assigns 1",
        ),
        ("vllm", {}, {"port": 0}, "port 0 is not a port"),
        ("vllm", {"kv_events": True}, {}, "kv_events needs a kv_events_port"),
        ("vllm", {"model_path": ""}, {}, "no weights"),
        ("llamacpp", {"nodes": 2}, {"gpus": ()}, "runs a replica on one node"),
        ("trtllm", {"nodes": 2, "tp": 2}, {}, "runs a replica on one node"),
        ("vllm", {"nodes": 2, "tp": 2}, {}, "needs the first node's master_address and a dist_port"),
        (
            "vllm",
            {"nodes": 2, "tp": 2},
            {"node_rank": 2, "master_address": "10.0.0.1", "dist_port": 20002},
            "node_rank 2 is not within the 2 nodes",
        ),
        ("llamacpp", {"runtime_lora": True, "max_loaded_adapters": 2}, {}, "loads adapters only at start"),
        ("sglang", {"adapters": (EngineAdapter("a", "/a"),)}, {}, "adapters on vllm and llamacpp only"),
        ("trtllm", {"adapters": (EngineAdapter("a", "/a"),)}, {}, "adapters on vllm and llamacpp only"),
    ],
)
def test_a_context_that_cannot_start_the_profile_is_refused(
    engine: str, profile_changes: dict[str, object], ctx_changes: dict[str, object], says: str
) -> None:
    with pytest.raises(ConfigError) as err:
        launch_for(_profile(engine, **profile_changes), _ctx(**ctx_changes))
    assert says in str(err.value)
    assert "model 'chat' profile 'p'" in str(err.value)


def test_sim_needs_no_weights() -> None:
    launch = launch_for(_profile("sim", model_path=""), _ctx(gpus=()))
    assert launch.env["CUDA_VISIBLE_DEVICES"] == ""


@pytest.mark.parametrize(
    ("profile", "rank", "needs"),
    [
        (_profile("llamacpp"), 0, PortNeeds(http=True)),
        (_profile("vllm"), 0, PortNeeds(http=True)),
        (_profile("vllm", kv_events=True), 0, PortNeeds(http=True, kv_events=True)),
        (_profile("vllm", nodes=2, tp=2, kv_events=True), 0, PortNeeds(http=True, dist=True, kv_events=True)),
        (_profile("vllm", nodes=2, tp=2, kv_events=True), 1, PortNeeds(http=False)),
        (_profile("sglang", nodes=2, tp=2), 0, PortNeeds(http=True, dist=True)),
        (_profile("sglang", nodes=2, tp=2), 1, PortNeeds(http=True)),
        (_profile("sglang", kv_events=True), 0, PortNeeds(http=True)),
    ],
)
def test_ports_needed(profile: EngineProfile, rank: int, needs: PortNeeds) -> None:
    assert ports_needed(profile, rank) == needs
    assert needs.count == sum((needs.http, needs.dist, needs.kv_events))


@pytest.mark.parametrize(
    ("arg", "flag"),
    [
        ("--port", "--port"),
        ("--port=8000", "--port"),
        ("--max_model_len 4096", "--max-model-len"),
        ("-np", "-np"),
        ("-c=8", "-c"),
        ("value", None),
        ("", None),
    ],
)
def test_flag_of(arg: str, flag: str | None) -> None:
    assert flag_of(arg) == flag


@pytest.mark.parametrize(
    ("args", "value"),
    [
        (("--parallel", "8"), "8"),
        (("--parallel=8",), "8"),
        (("--parallel 8",), "8"),
        (("-np", "3", "--x"), "3"),
        (("--parallel",), None),
        (("--parallel", "--metrics"), None),
        (("--threads", "2"), None),
    ],
)
def test_profile_value(args: tuple[str, ...], value: str | None) -> None:
    assert profile_value(args, "-np", "--parallel") == value
    assert profile_sets(args, "-np", "--parallel") == any(
        a.lstrip().startswith(("-np", "--parallel")) for a in args
    )


def test_env_layers_defaults_then_profile_then_forced() -> None:
    env = layered_env({"NCCL_SOCKET_IFNAME": "eth0", "A": "1"}, {"NCCL_SOCKET_IFNAME": "ib0"}, {"A": "2"})
    assert env == {"NCCL_SOCKET_IFNAME": "ib0", "A": "2"}
