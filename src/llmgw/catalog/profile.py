"""A profile: one way a model can run, on one GPU class or on CPUs.

Fields left out of the YAML stay empty here (0, "", None), exactly as written;
`normalize` fills in the defaults (engine vllm, tp 1, one node, twenty minutes to start),
so a profile can always be told apart from one that spelled the default out.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import Any

from pydantic import Field

from llmgw.catalog.comfyui import ProfileComfyUI
from llmgw.core.durations import Duration
from llmgw.core.strict import Strict
from llmgw.hardware.gpus import GPUNeed, classes_meeting, is_mig_class

CPU_ENGINES: tuple[str, ...] = ("llamacpp", "sim")
"""Engines that can serve without a card. Only these may leave the GPU out: otherwise
an omitted class would become a replica placed on a machine with nothing to run it.
The simulated engine runs on any machine, so a sim profile without a class is a CPU
profile: what a cluster with no cards (and `llmgw server` out of the box) places."""


def cpu_capable(engine: str) -> bool:
    """Whether an engine can serve a model without a GPU."""
    return engine in CPU_ENGINES


class Profile(Strict):
    """How a model runs on one GPU class (or on CPUs, for llama.cpp)."""

    name: str = ""
    engine: str = ""
    engine_version: str = ""
    """A prefix of the node's engine version: "0.11" takes 0.11.0 and 0.11.1, not 0.10.2."""
    gpu_class: str = ""
    source: str = ""
    """The weights this profile loads, when not the model's (a GGUF for llama.cpp beside
    the repository vLLM loads). Updates and canaries move the model's source, not this."""
    tp: int = 0
    pp: int = 0
    gpus_per_node: int = 0
    """Defaults to tp for a one-node profile."""
    nodes: int = 0
    """Above 1, a multi-node replica, which needs a fabric between the nodes."""
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)
    min_memory_gb: int = 0
    """Host RAM the replica's working set needs; for a CPU profile, all of it. 0 is no
    constraint, and a node that reports no memory is not excluded."""
    cpu_cores: int = 0
    """Cores reserved for a replica without a GPU (llama.cpp's --threads): two engines
    that each think they own every core spin against each other."""
    min_disk_gb: int = 0
    """Free space needed by a node that does not hold the weights yet."""
    node_selector: dict[str, str] = Field(default_factory=dict)
    """Only nodes carrying every one of these labels, with these values."""
    power_watts: float = 0
    """One replica's draw, split over its nodes and counted against power caps; 0 derives it."""
    keep_within: str = ""
    """Keeps a multi-node replica inside one site, room, row, rack or pdu."""
    weight: float = 0
    """The router's capacity weight, ideally measured on the deployment's replicas."""
    priority: int = 0
    """Placement tries higher priorities first."""
    startup_timeout: Duration = timedelta(0)
    """How long loading may take: tens of minutes for a 70B model over two nodes."""
    kv_events: bool = False
    """vLLM publishes its prefix cache for the router to route by. This version opens the
    engine's port only: the router does not subscribe (`llmgw.config.inert`)."""
    gpu: GPUNeed | None = None
    """The card needed, in place of gpu_class: it stands for every class that meets it."""
    comfyui: ProfileComfyUI | None = None

    @property
    def cpu_only(self) -> bool:
        """Whether this profile needs no GPU at all."""
        return self.gpu_class == "" and self.gpu is None and cpu_capable(self.engine)

    @property
    def gpus(self) -> int:
        """Cards one replica takes, over all its nodes."""
        return self.gpus_per_node * max(self.nodes, 1)

    def fingerprint(self) -> str:
        """The first 16 hex of the sha256 of the profile's contents: an edited profile
        keeps its name, and this is how a replica running the old definition is told
        from one running the new. Empty fields are left out, as is the order of maps, so
        a field added to llmgw later does not change every fingerprint."""
        data: Any = self.model_dump(mode="json", by_alias=True, exclude_defaults=True)
        text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def for_class(self, gpu_class: str) -> Profile:
        """This profile placed on `gpu_class`, named `<profile>@<class>` so the replica's
        profile can be found again by that name."""
        return self.model_copy(
            update={"name": f"{self.name}@{gpu_class}", "gpu_class": gpu_class, "gpu": None}
        )

    def classes_for(self, classes: Iterable[str]) -> list[str]:
        """The classes among `classes` this profile can run on: its own, or every one its
        need stands for. A MIG instance serves only a one-card replica, since a process
        opens one MIG device and instances have no NVLink between them."""
        if self.gpu is None:
            return [self.gpu_class] if self.gpu_class and self.gpu_class in set(classes) else []
        found = classes_meeting(self.gpu, classes)
        if self.gpus > 1 or self.tp > 1 or self.pp > 1:
            found = [c for c in found if not is_mig_class(c)]
        return found


def suggest_cores(cpu_counts: Sequence[int]) -> int:
    """Cores to give a GPU-less replica on nodes with these CPU counts: half the smallest,
    so two replicas share any of them without competing; 0 when no node says."""
    known = [c for c in cpu_counts if c > 0]
    if not known:
        return 0
    return max(min(known) // 2, 1)
