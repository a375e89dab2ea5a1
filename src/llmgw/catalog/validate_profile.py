"""The rules one profile of a normalised model must meet.

Each is something that would otherwise fail late and confusingly: a replica placed on a
machine with no card for it, an engine handed a shard layout it cannot satisfy and
failing minutes into loading, a setting the agent owns silently overridden. The shape
rules (how wide a replica is) depend on one another, so only the first of them is
reported; the others are independent and all reported.
"""

from __future__ import annotations

from llmgw.catalog.model import Model
from llmgw.catalog.profile import Profile, cpu_capable
from llmgw.catalog.quoting import q
from llmgw.engines import ENGINES
from llmgw.engines.safety import unsafe_args, unsafe_env
from llmgw.hardware.facility import parse_level
from llmgw.hardware.gpus import is_mig_class, valid_class_name


def profile_problems(m: Model, p: Profile) -> list[str]:
    """Every problem of profile `p` of model `m`, each a sentence naming both."""
    who = f"model {q(m.name)} profile {q(p.name)}"
    if p.engine not in ENGINES:
        return [f"{who}: engine {q(p.engine)} is not one of {', '.join(ENGINES)}"]
    out = [f"{who}: {problem}" for problem in _setting_problems(p)]
    hardware = _hardware_problems(p)
    out.extend(f"{who}: {problem}" for problem in hardware)
    # How wide a replica is can only be judged on hardware that is itself well described.
    shape = None if hardware else _shape_problem(m, p)
    if shape is not None:
        out.append(f"{who}: {shape}")
    return out


def _setting_problems(p: Profile) -> list[str]:
    out: list[str] = []
    for key in p.env:
        why = unsafe_env(key)
        if why is not None:
            out.append(f"env {key} cannot be set in a profile: {why}; remove it")
    out.extend(unsafe_args(p.engine, p.args))
    if p.kv_events and p.engine != "vllm":
        out.append(f"kv_events is vLLM's, and engine {p.engine} publishes no cache events; remove kv_events")
    if p.power_watts < 0:
        out.append(
            f"power_watts {p.power_watts:g} is negative; give a replica's draw in watts, or 0 to derive it"
        )
    if p.keep_within:
        try:
            parse_level(p.keep_within)
        except ValueError as exc:
            out.append(f"keep_within: {exc}")
    if p.comfyui is not None and p.engine != "comfyui":
        out.append("comfyui: is for a profile with engine comfyui; remove it or change the engine")
    return out


def _hardware_problems(p: Profile) -> list[str]:
    out: list[str] = []
    if p.gpu_class and p.gpu is not None:
        out.append(
            "gpu_class and gpu are both given; keep gpu_class for one class,"
            " or gpu for every class that meets it"
        )
    if p.gpu_class and not valid_class_name(p.gpu_class):
        out.append(
            f"gpu_class {q(p.gpu_class)} is not a GPU class: write the card and its memory, like h100-80g,"
            " or a MIG instance, like a100-40g-mig-3g.20gb; leave it out for a llama.cpp profile on CPUs"
        )
    if p.gpu is not None:
        out.extend(p.gpu.problems())
    for field, value in (
        ("min_memory_gb", p.min_memory_gb),
        ("cpu_cores", p.cpu_cores),
        ("min_disk_gb", p.min_disk_gb),
    ):
        if value < 0:
            out.append(f"{field} {value} is negative; give 0 for no requirement")
    for key in p.node_selector:
        if not key.strip():
            out.append("node_selector has an empty label name; name the label each node must carry")
    return out


def _shape_problem(m: Model, p: Profile) -> str | None:
    """The first thing wrong with how wide a replica is, or None."""
    if not p.gpu_class and p.gpu is None and not cpu_capable(p.engine):
        return (
            f"engine {p.engine} needs a GPU: give gpu_class (like h100-80g), or gpu: with the card it needs"
        )
    if p.cpu_only:
        if p.nodes > 1:
            return f"a CPU profile runs on one node, not {p.nodes}; set nodes to 1"
        return None
    # A process can open one MIG device, and instances have no NVLink or peer-to-peer
    # between them: a group of them is a replica that fails at start.
    if is_mig_class(p.gpu_class) and (p.gpus_per_node > 1 or p.nodes > 1 or p.tp > 1 or p.pp > 1):
        return (
            f"{p.gpu_class} is a MIG instance and a replica runs on exactly one, since a process opens"
            " one MIG device and instances share no NVLink; give tp 1, one GPU and one node, or use a"
            " whole-card class or a larger MIG profile"
        )
    # llama.cpp splits a model over one node's cards by layer; it has no tensor parallelism,
    # and a tp it was given was a width nothing placed.
    if p.engine == "llamacpp":
        if p.nodes > 1:
            return f"llama.cpp does not span nodes; use vllm or sglang for a {p.nodes}-node replica"
        if p.tp > 1 or p.pp > 1:
            return (
                "llama.cpp splits a model over one node's GPUs by layer, and"
                f" tp {max(p.tp, 1) * max(p.pp, 1)} disagrees with gpus_per_node {p.gpus_per_node};"
                " give gpus_per_node alone"
            )
        return None
    # TensorRT-LLM spans machines only under MPI started from one of them, which agents
    # that each start their own node do not do; and it loads Hugging Face checkpoints.
    if p.engine == "trtllm":
        if p.nodes > 1:
            return f"trtllm runs a replica on one node; use vllm or sglang for a {p.nodes}-node replica"
        if m.source_of(p).rstrip("/").lower().endswith(".gguf"):
            return "trtllm loads a Hugging Face checkpoint, not a .gguf; serve a GGUF with engine llamacpp"
    # Otherwise the engine is handed a shard layout it cannot fill, and fails minutes
    # into loading the weights.
    if p.gpus_per_node * p.nodes != p.tp * max(p.pp, 1):
        return (
            f"gpus_per_node {p.gpus_per_node} x nodes {p.nodes} gives {p.gpus_per_node * p.nodes} GPUs,"
            f" but tp {p.tp} x pp {max(p.pp, 1)} needs {p.tp * max(p.pp, 1)};"
            " make gpus_per_node x nodes equal tp x pp"
        )
    return None
