"""The engine's view of a catalog profile: what an agent needs to start one replica.

The catalog holds what an operator wrote; this is that profile resolved against its
model: the weights it loads, the name it answers to, the adapters it carries, and the
environment the catalog adds for it. Built by `Model.engine_profile`, read by the
engines' command-line builders.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta

from llmgw.engines.safety import RUNTIME_LORA_ENV


@dataclass(frozen=True)
class EngineAdapter:
    """A LoRA adapter as the engine loads it: by name, from a path or repository."""

    name: str
    path: str


@dataclass(frozen=True)
class EngineProfile:
    """One profile, resolved for the engine that runs it."""

    name: str
    engine: str
    gpu_class: str = ""
    tp: int = 1
    pp: int = 0
    gpus_per_node: int = 0
    nodes: int = 1
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    model_path: str = ""
    served_model_name: str = ""
    adapters: tuple[EngineAdapter, ...] = ()
    kv_events: bool = False
    cpu_cores: int = 0
    startup_timeout: timedelta = timedelta(minutes=20)
    runtime_lora: bool = False
    """Adapters are loaded by the router when first asked for, not at start."""
    max_loaded_adapters: int = 0
    """At most this many adapters held at once when runtime_lora is on."""

    def with_runtime_lora(self, max_loaded_adapters: int) -> EngineProfile:
        """This profile set up to load adapters on demand, when the model caps how many a
        replica holds; unchanged otherwise. Only vLLM can load an adapter after start,
        which the catalog already required of every such profile."""
        if max_loaded_adapters <= 0 or self.engine != "vllm":
            return self
        # The variable is what opens vLLM's load/unload endpoints; the catalog refuses it
        # in a profile's own env so that it is set here, together with the cap, or not at all.
        env = {**self.env, RUNTIME_LORA_ENV: "True"}
        return dataclasses.replace(self, env=env, runtime_lora=True, max_loaded_adapters=max_loaded_adapters)
