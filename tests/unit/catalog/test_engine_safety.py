"""What a profile may not tell an engine, and the engine view of a profile."""

from __future__ import annotations

import pytest

from llmgw.engines import RUNTIME_LORA_ENV, EngineProfile, unsafe_args, unsafe_env


@pytest.mark.parametrize(
    ("name", "because"),
    [
        ("LD_PRELOAD", "shared libraries"),
        ("LD_LIBRARY_PATH", "shared libraries"),
        ("LD_AUDIT", "shared libraries"),
        ("DYLD_INSERT_LIBRARIES", "shared libraries"),
        ("PYTHONPATH", "load code"),
        ("PYTHONHOME", "load code"),
        ("BASH_ENV", "shell"),
        ("PATH", "which program"),
        ("PYTHONHASHSEED", "kv_events"),
        ("CUDA_VISIBLE_DEVICES", "devices"),
        ("HIP_VISIBLE_DEVICES", "devices"),
        ("VLLM_PORT", "ports"),
        ("VLLM_HOST_IP", "address"),
        ("VLLM_API_KEY", "key"),
        ("HF_TOKEN", "credential"),
        ("HF_HOME", "weights"),
        ("LLMGW_COMFYUI_NODES", "agent's own"),
        ("BAD=NAME", "not a variable name"),
        ("", "not a variable name"),
        ("1ST", "not a variable name"),
    ],
)
def test_unsafe_env(name: str, because: str) -> None:
    why = unsafe_env(name)
    assert why is not None
    assert because in why


@pytest.mark.parametrize(
    "name",
    [
        "VLLM_USE_V1",
        "NCCL_DEBUG",
        "OMP_NUM_THREADS",
        "HF_HUB_OFFLINE",
        "TOKENIZERS_PARALLELISM",
        RUNTIME_LORA_ENV,
    ],
)
def test_safe_env(name: str) -> None:
    assert unsafe_env(name) is None


@pytest.mark.parametrize(
    ("engine", "args", "flag"),
    [
        ("vllm", ["--port", "8000"], "--port"),
        ("vllm", ["--host=0.0.0.0"], "--host"),
        ("vllm", ["--port 8000"], "--port"),
        ("vllm", ["--api-key", "k"], "--api-key"),
        ("vllm", ["--served_model_name", "x"], "--served-model-name"),
        ("vllm", ["-tp", "4"], "-tp"),
        ("vllm", ["--tensor-parallel-size=4"], "--tensor-parallel-size"),
        ("vllm", ["--lora-modules", "a=b"], "--lora-modules"),
        ("vllm", ["--kv-events-config", "{}"], "--kv-events-config"),
        ("llamacpp", ["-m", "/other.gguf"], "-m"),
        ("llamacpp", ["--alias", "x"], "--alias"),
        ("llamacpp", ["--lora", "x.gguf"], "--lora"),
        ("llamacpp", ["--path", "/"], "--path"),
        ("llamacpp", ["--api-key-file", "/k"], "--api-key-file"),
        ("sglang", ["--model-path", "x"], "--model-path"),
        ("sglang", ["--tp-size", "2"], "--tp-size"),
        ("sglang", ["--nnodes", "2"], "--nnodes"),
        ("trtllm", ["--tp_size", "2"], "--tp-size"),
        ("comfyui", ["--listen", "0.0.0.0"], "--listen"),
        ("comfyui", ["--extra-model-paths-config", "/x.yaml"], "--extra-model-paths-config"),
        ("sim", ["--port", "1"], "--port"),
    ],
)
def test_unsafe_args(engine: str, args: list[str], flag: str) -> None:
    (problem,) = unsafe_args(engine, args)
    assert f"args {flag} " in problem
    assert f"engine {engine}" in problem
    assert problem.endswith("remove it")


@pytest.mark.parametrize(
    ("engine", "args"),
    [
        ("vllm", ["--trust-remote-code", "--max-model-len", "8192", "--gpu-memory-utilization=0.9"]),
        ("vllm", ["--prefix-caching-hash-algo", "sha256"]),
        ("llamacpp", ["--ctx-size", "8192", "-ngl", "99", "--threads", "4", "--port-ish"]),
        ("sglang", ["--mem-fraction-static", "0.8"]),
        ("comfyui", ["--lowvram"]),
        ("llamacpp", ["-tp", "2"]),  # -tp is vLLM's; to llama-server it is nothing of the agent's
    ],
)
def test_safe_args(engine: str, args: list[str]) -> None:
    assert unsafe_args(engine, args) == []


def test_every_refused_argument_is_reported() -> None:
    assert len(unsafe_args("vllm", ["--host", "h", "--port", "1", "--max-model-len", "4"])) == 2


def test_runtime_lora_is_vllm_with_a_cap() -> None:
    base = EngineProfile(name="p", engine="vllm", env={"A": "1"})
    on = base.with_runtime_lora(3)
    assert on.runtime_lora
    assert on.max_loaded_adapters == 3
    assert dict(on.env) == {"A": "1", RUNTIME_LORA_ENV: "True"}
    assert dict(base.env) == {"A": "1"}  # the original is untouched
    assert base.with_runtime_lora(0) is base
    llama = EngineProfile(name="p", engine="llamacpp")
    assert llama.with_runtime_lora(3) is llama
