"""LoRA adapters: small sets of weights served on a model's replicas, each asked for
by its own name as though it were a model.

Every replica loads every adapter at start, unless the model caps how many a replica
holds (`max_loaded_adapters`); then the router loads one onto a replica when a request
first asks for it there, unloading the least recently used to make room
(llmgw.router.lora_loader). llama-server can only rescale adapters it
loaded at start, so a cap there would cap nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from llmgw.catalog.profile import Profile
from llmgw.catalog.quoting import q
from llmgw.core.strict import Strict
from llmgw.engines.safety import RUNTIME_LORA_ENV

ADAPTER_OWNER_SCOPES: tuple[str, ...] = ("org", "team", "project", "user", "key")
ADAPTER_ENGINES: tuple[str, ...] = ("llamacpp", "vllm", "sim")
"""Engines that are driven to serve adapters: llama.cpp loads them at start, vLLM at
start or on demand, and the simulator pretends to."""


class Adapter(Strict):
    """A LoRA adapter served on a model's replicas."""

    name: str = ""
    """What clients ask for, like a model name."""
    source: str = ""
    """A GGUF file for llama.cpp; for vLLM a PEFT directory (a mirror version ending in
    '/', a path on the node, or a Hugging Face id)."""
    scale: float = 0
    """How strongly it is applied; 0 is 1. llama-server is sent it with each request;
    vLLM cannot apply one, so a scale other than 1 on a vLLM model is refused."""
    owner: str = ""
    """org:ID, team:ID, project:ID, user:ID or key:ID: only callers in it see the adapter,
    which to anyone else does not exist (its weights carry what it was trained on).
    Empty is every caller the model allows."""

    @property
    def effective_scale(self) -> float:
        """The scale it is applied at."""
        return self.scale if self.scale > 0 else 1.0


def adapter_owner_problem(owner: str) -> str | None:
    """Why an adapter's owner is not scope:ID, or None when it is (or is empty)."""
    if owner == "":
        return None
    scope, sep, ident = owner.partition(":")
    if not sep or not ident:
        return f"owner {q(owner)} is not scope:ID, like team:research"
    if scope not in ADAPTER_OWNER_SCOPES:
        return f"owner scope {q(scope)} is not one of {', '.join(ADAPTER_OWNER_SCOPES)}"
    return None


def adapter_problems(
    model: str,
    adapters: Sequence[Adapter],
    max_loaded: int,
    profiles: Sequence[Profile],
    external: bool,
) -> list[str]:
    """Every problem with a model's adapters, each a sentence naming the model."""
    who = f"model {q(model)}"
    if max_loaded < 0:
        return [f"{who}: max_loaded_adapters {max_loaded} is negative; give 0 to load every adapter at start"]
    if max_loaded > 0:
        for p in profiles:
            if p.engine != "vllm":
                return [
                    f"{who} profile {q(p.name)}: max_loaded_adapters needs vllm profiles, and engine"
                    f" {p.engine} loads every adapter at start; remove max_loaded_adapters or use vllm"
                ]
    if not adapters:
        return []
    if external:
        return [f"{who}: an external model cannot carry adapters; serve them on a model of the cluster"]
    out: list[str] = []
    for p in profiles:
        if p.engine == "comfyui":
            continue  # the ComfyUI rules say why, in ComfyUI's terms
        if p.engine not in ADAPTER_ENGINES:
            out.append(
                f"{who} profile {q(p.name)}: engine {p.engine} serves no adapters; use llamacpp or vllm"
            )
        elif RUNTIME_LORA_ENV in p.env and max_loaded == 0:
            # Set by hand, replicas would start holding no adapter, and the router loads
            # them only for a model with a cap: nothing would ever load one.
            out.append(
                f"{who} profile {q(p.name)}: env {RUNTIME_LORA_ENV} is the catalog's to set;"
                " remove it and set max_loaded_adapters instead"
            )
    seen: set[str] = set()
    for a in adapters:
        problem = adapter_owner_problem(a.owner)
        if problem is not None:
            out.append(f"{who} adapter {q(a.name)}: {problem}")
        if not a.name or not a.source:
            out.append(f"{who}: adapter {q(a.name)} needs both a name and a source")
        elif a.name == model:
            out.append(f"{who}: adapter {q(a.name)} has the model's own name; give it a name of its own")
        elif a.name in seen:
            out.append(f"{who}: adapter {q(a.name)} is declared twice; keep one")
        elif a.scale < 0:
            out.append(
                f"{who}: adapter {q(a.name)} scale {a.scale:g} is negative; give 0 (meaning 1) or more"
            )
        elif a.effective_scale != 1.0 and (max_loaded > 0 or any(p.engine == "vllm" for p in profiles)):
            # llama-server takes a scale with each request; vLLM has no such field.
            out.append(
                f"{who}: adapter {q(a.name)} scale {a.scale:g} cannot be applied by vLLM, which runs"
                " adapters at full scale; remove scale or serve the model on llamacpp"
            )
        elif max_loaded > 0 and ("/" in a.name or "\\" in a.name or a.name in (".", "..")):
            # Loaded on demand, the adapter's name becomes a file name on the node.
            out.append(
                f"{who}: adapter {q(a.name)} cannot have a slash in its name when adapters load"
                " on demand (it becomes a file name on the node); rename it"
            )
        seen.add(a.name)
    return out
