"""The engine environment variables and arguments a catalog profile may not set.

A profile's `env:` and `args:` reach the engine process unchanged, and whoever may edit
the catalog is not necessarily whoever may run code on every node. So two kinds of
setting are refused when the catalog loads, where the refusal is cheap, rather than
found out on a node:

- what would run code the engine was not shipped with, or hand the process a credential
  that would then be stored in the catalog and shown by every view of it;
- what the agent decides per replica: where the engine listens, under which name and
  key, which devices it sees, how wide it is. The agent health-checks the address it
  chose, the router sends the name it knows, and placement reserved the cards it counted;
  a profile that overrides one of those makes a replica that starts and then is never
  reached, or that runs on another replica's cards.

`--trust-remote-code` is deliberately allowed. It runs Python from the model's own
repository, but the catalog's author already chose those weights, and several current
models (DeepSeek, some Qwen and Phi variants) do not load without it. Refusing it would
push operators to forks of the weights, which is no safer.

The routing-affecting vLLM settings that kv_events assumes (block hash algorithm) are
allowed too: overriding them leaves the KV index empty, which the agent logs, but the
model still serves.
"""

from __future__ import annotations

import re

RUNTIME_LORA_ENV = "VLLM_ALLOW_RUNTIME_LORA_UPDATING"
"""The vLLM variable that enables loading adapters while running; set by the catalog
from max_loaded_adapters, never by hand."""

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

_LOADS_CODE = "it makes the engine load code from a path of the profile's choosing"
_DEVICES = "the agent gives each replica the devices placement reserved for it"

_UNSAFE_ENV: dict[str, str] = {
    "PYTHONPATH": _LOADS_CODE,
    "PYTHONHOME": _LOADS_CODE,
    "PYTHONSTARTUP": _LOADS_CODE,
    "PYTHONUSERBASE": _LOADS_CODE,
    "BASH_ENV": "a shell the engine starts would run the file it names",
    "PATH": "it decides which program runs for every command the engine starts",
    "PYTHONHASHSEED": "the agent fixes it so the router can compute the block hashes kv_events reports",
    "CUDA_VISIBLE_DEVICES": _DEVICES,
    "NVIDIA_VISIBLE_DEVICES": _DEVICES,
    "HIP_VISIBLE_DEVICES": _DEVICES,
    "ROCR_VISIBLE_DEVICES": _DEVICES,
    "ZE_AFFINITY_MASK": _DEVICES,
    "VLLM_HOST_IP": "the agent sets the address each replica is reached at",
    "VLLM_PORT": "the agent sets the ports each replica uses",
    "VLLM_API_KEY": "the agent gives each replica the key only the gateway holds",
    "HF_TOKEN": "a credential written in the catalog is stored and shown with it; give the agent its token",
    "HUGGING_FACE_HUB_TOKEN": "a credential written in the catalog is stored and shown with it",
    "HF_HOME": "the agent decides where weights are kept, so it can account for and collect them",
    "HF_HUB_CACHE": "the agent decides where weights are kept, so it can account for and collect them",
}

_UNSAFE_ENV_PREFIXES: tuple[tuple[str, str], ...] = (
    ("LD_", "it changes which shared libraries the engine loads (LD_PRELOAD, LD_LIBRARY_PATH, …)"),
    ("DYLD_", "it changes which shared libraries the engine loads"),
    ("LLMGW_", "names starting LLMGW_ carry the agent's own settings to the engine"),
)


def unsafe_env(name: str) -> str | None:
    """Why a profile may not set this environment variable, or None when it may."""
    if not _ENV_NAME.match(name):
        return "it is not a variable name (letters, digits and '_', not starting with a digit)"
    if name in _UNSAFE_ENV:
        return _UNSAFE_ENV[name]
    for prefix, why in _UNSAFE_ENV_PREFIXES:
        if name.startswith(prefix):
            return why
    return None


_LISTEN = "the agent binds each replica to the address and port it health-checks"
_KEY = "the agent gives each replica the key only the gateway holds"
_NAME = "the replica answers to the catalog's model name, which the router sends"
_WEIGHTS = "the weights come from the model's or the profile's source"
_WIDTH = "the profile's tp, pp and nodes say this, and placement reserved cards by them"
_ADAPTERS = "adapters are declared under the model's adapters"
_MULTINODE = "the agent wires a multi-node replica's nodes together itself"
_PATHS = "it points the engine at directories of the node the agent does not manage"

_ALWAYS: dict[str, str] = {"--host": _LISTEN, "--port": _LISTEN, "--api-key": _KEY}

# Long flags are compared with '_' read as '-', as vLLM's and SGLang's parsers read them.
_BY_ENGINE: dict[str, dict[str, str]] = {
    "vllm": {
        "--model": _WEIGHTS,
        "--served-model-name": _NAME,
        "--tensor-parallel-size": _WIDTH,
        "-tp": _WIDTH,
        "--pipeline-parallel-size": _WIDTH,
        "-pp": _WIDTH,
        "--lora-modules": _ADAPTERS,
        "--kv-events-config": "kv_events: true on the profile turns cache events on",
        "--uds": _LISTEN,
    },
    "llamacpp": {
        "-m": _WEIGHTS,
        "--model": _WEIGHTS,
        "-mu": _WEIGHTS,
        "--model-url": _WEIGHTS,
        "-hf": _WEIGHTS,
        "--hf-repo": _WEIGHTS,
        "-a": _NAME,
        "--alias": _NAME,
        "--lora": _ADAPTERS,
        "--lora-scaled": _ADAPTERS,
        "--api-key-file": _KEY,
        "--path": "llama-server would serve the files of that directory to anyone who can reach it",
    },
    "sglang": {
        "--model-path": _WEIGHTS,
        "--model": _WEIGHTS,
        "--served-model-name": _NAME,
        "--tp-size": _WIDTH,
        "--tp": _WIDTH,
        "--pp-size": _WIDTH,
        "--nnodes": _MULTINODE,
        "--node-rank": _MULTINODE,
        "--dist-init-addr": _MULTINODE,
    },
    "trtllm": {"--tp-size": _WIDTH, "--pp-size": _WIDTH},
    "comfyui": {
        "--listen": _LISTEN,
        "--extra-model-paths-config": _PATHS,
        "--base-directory": _PATHS,
        "--output-directory": _PATHS,
        "--input-directory": _PATHS,
        "--user-directory": _PATHS,
    },
}


def _flag(arg: str) -> str | None:
    """The flag an argument sets (`--port=8000` and `--port 8000` alike), or None for a value."""
    words = arg.strip().split()
    if not words or not words[0].startswith("-"):
        return None
    flag = words[0].split("=", 1)[0]
    return flag.replace("_", "-") if flag.startswith("--") else flag


def unsafe_args(engine: str, args: tuple[str, ...] | list[str]) -> list[str]:
    """Every argument of `args` the profile may not give `engine`, each as a sentence tail
    naming the flag, why, and the fix."""
    refused = {**_ALWAYS, **_BY_ENGINE.get(engine, {})}
    problems: list[str] = []
    for arg in args:
        flag = _flag(arg)
        if flag is not None and flag in refused:
            problems.append(f"args {flag} is not allowed for engine {engine}: {refused[flag]}; remove it")
    return problems
