"""A catalog model: a name clients ask for, the weights behind it, the ways it can run,
and how many copies of it to keep.

The YAML keys are the field names, except `class`, a Python keyword, held as `class_`
and read and written as `class`. What a field left out means is its empty value, as
written; `normalized()` fills in defaults, and `llmgw.catalog.validate` says what is
wrong. Everything here is a pure reading of the definition.
"""

from __future__ import annotations

import json
import posixpath

from pydantic import ConfigDict, Field

from llmgw.catalog import comfy
from llmgw.catalog.adapters import Adapter
from llmgw.catalog.classes import effective_class
from llmgw.catalog.comfyui import (
    HF_REPO_ENV,
    NODES_ENV,
    SHARED_MODELS_ENV,
    ComfyUI,
    CustomNode,
    SharedMember,
    merge_nodes,
)
from llmgw.catalog.external import API_COMFYUI, External
from llmgw.catalog.license import License
from llmgw.catalog.normalize import normalize_profile, normalize_scaling, normalize_sources
from llmgw.catalog.parts import (
    ROLE_GUARD,
    SLO,
    Canary,
    Capabilities,
    EvalGate,
    GuardModel,
    Origin,
)
from llmgw.catalog.profile import Profile
from llmgw.catalog.scaling import Scaling
from llmgw.core.strict import Strict
from llmgw.engines.profile import EngineAdapter, EngineProfile

ENGINE_COMFYUI = "comfyui"
ENGINE_SIM = "sim"


class Model(Strict):
    """A catalog entry as clients see it."""

    model_config = ConfigDict(validate_by_name=True, validate_by_alias=True, serialize_by_alias=True)

    name: str = ""
    aliases: tuple[str, ...] = ()
    description: str = ""
    """What the model is for, in a line: the one thing /v1/models can tell a person
    choosing between names."""
    source: str = ""
    """The weights: a path on the mirror or a Hugging Face id."""
    profiles: tuple[Profile, ...] = ()
    scaling: Scaling = Scaling()
    class_: str = Field("", alias="class")
    """critical, standard or opportunistic; empty is decided by `effective_class`."""
    owner: str = ""
    """org:ID, team:ID or project:ID whose capacity quota it counts against; empty is shared."""
    external: External | None = None
    comfyui: ComfyUI | None = None
    license: License | None = None
    adapters: tuple[Adapter, ...] = ()
    max_loaded_adapters: int = 0
    """Above 0, each replica holds at most this many adapters, loaded on demand (vLLM)."""
    fallbacks: tuple[str, ...] = ()
    """Models tried, in order, when this one has no capacity; checked at load."""
    canary: Canary | None = None
    eval: EvalGate | None = None
    routing_profile: str = ""
    slo: SLO = SLO()
    context_length: int = 0
    """Tokens one request may use, prompt and completion together; 0 is unknown."""
    max_output: int = 0
    """Tokens a completion may have; 0 is unknown."""
    capabilities: Capabilities = Capabilities()
    query_prefix: str = ""
    """Put before a query an embedding model embeds for search; documents go without it.
    Not acted on by this version (`llmgw.config.inert`)."""
    role: str = ""
    """guard: judges traffic for the guardrails; hidden from clients and always running.
    Not acted on by this version (`llmgw.config.inert`)."""
    guard: GuardModel | None = None
    origin: Origin | None = None

    def normalized(self) -> Model:
        """This model with its defaults filled in."""
        profiles = tuple(normalize_profile(p) for p in self.profiles)
        source, profiles = normalize_sources(self.source, profiles)
        return self.model_copy(
            update={"scaling": normalize_scaling(self.scaling), "source": source, "profiles": profiles}
        )

    @property
    def on_demand(self) -> bool:
        """Whether it is loaded only when asked for."""
        return self.scaling.on_demand

    @property
    def is_guard(self) -> bool:
        return self.role == ROLE_GUARD

    @property
    def is_external(self) -> bool:
        return self.external is not None

    @property
    def is_peer(self) -> bool:
        """Whether a federated llmgw cluster offers it."""
        return self.external is not None and self.external.peer != ""

    @property
    def is_environment(self) -> bool:
        """Whether this is the hidden entry of a shared ComfyUI replica."""
        return False

    @property
    def simulated(self) -> bool:
        """Whether every profile is the simulated engine. One real profile means a request
        may get a real answer, and such a model must not be labelled as placeholder text."""
        return bool(self.profiles) and all(p.engine == ENGINE_SIM for p in self.profiles)

    @property
    def effective_class(self) -> str:
        return effective_class(self.class_, guard=self.is_guard, on_demand=self.on_demand)

    @property
    def kv_index(self) -> bool:
        """Whether the router routes this model by the KV cache its replicas report."""
        return any(p.kv_events for p in self.profiles)

    def source_of(self, profile: Profile) -> str:
        """The weights a profile loads: its own, or the model's."""
        return profile.source or self.source

    def weight_sources(self) -> list[str]:
        """Every source a replica may load, once each: what a node must keep."""
        out = [self.source] if self.source else []
        for p in self.profiles:
            if p.source and p.source not in out:
                out.append(p.source)
        return out

    def profile_by_name(self, name: str) -> Profile | None:
        """A profile by its name, or `<profile>@<class>` for a profile that names its card
        by need, placed on that class."""
        for p in self.profiles:
            if p.name == name:
                return p
        base, sep, gpu_class = name.partition("@")
        if not sep or not gpu_class:
            return None
        for p in self.profiles:
            if p.name == base and p.gpu is not None:
                return p.for_class(gpu_class)
        return None

    # ComfyUI

    @property
    def serves_comfyui(self) -> bool:
        """Whether ComfyUI makes this model's output, in the cluster or outside it."""
        if self.external is not None:
            return self.external.api == API_COMFYUI
        return bool(self.profiles) and self.profiles[0].engine == ENGINE_COMFYUI

    @property
    def comfy_output(self) -> str:
        """What a ComfyUI model makes: pictures unless it says otherwise."""
        if self.external is not None:
            return self.external.output or comfy.OUTPUT_PICTURES
        if self.comfyui is not None:
            return self.comfyui.output or comfy.OUTPUT_PICTURES
        return comfy.OUTPUT_PICTURES

    @property
    def makes_images(self) -> bool:
        return self.capabilities.images or (
            self.serves_comfyui and self.comfy_output == comfy.OUTPUT_PICTURES
        )

    @property
    def makes_meshes(self) -> bool:
        return self.capabilities.meshes or (self.serves_comfyui and self.comfy_output == comfy.OUTPUT_MESHES)

    def comfy_workflow(self, profile: Profile | None = None) -> tuple[str, str]:
        """The workflow a ComfyUI replica is sent and the checkpoint it loads, the
        profile's own where it has them; the checkpoint defaults to the source's file name,
        which a source that is a directory (ending in '/') does not have."""
        if self.external is not None:
            return self.external.workflow, self.external.model
        workflow = self.comfyui.workflow if self.comfyui else ""
        checkpoint = self.comfyui.checkpoint if self.comfyui else ""
        if profile is not None and profile.comfyui is not None:
            workflow = profile.comfyui.workflow or workflow
            checkpoint = profile.comfyui.checkpoint or checkpoint
        if not checkpoint and not self.source.endswith("/"):
            checkpoint = posixpath.basename(self.source.removeprefix("hf:"))
        return workflow, checkpoint

    def comfy_inputs(self) -> tuple[comfy.Input, ...]:
        """What the workflow takes from a request: declared, or the built-in's own."""
        if self.comfyui is not None and self.comfyui.inputs:
            return self.comfyui.inputs
        workflow, _ = self.comfy_workflow()
        found = comfy.builtin(workflow) if not comfy.is_file(workflow) else None
        return found.inputs if found is not None else ()

    def comfy_nodes_for(self, profile: Profile) -> tuple[CustomNode, ...]:
        """The custom nodes a profile's replicas need: the model's, with the profile's
        laid over them."""
        base = self.comfyui.nodes if self.comfyui else ()
        over = profile.comfyui.nodes if profile.comfyui else ()
        return merge_nodes(base, over)

    def shared_members(self) -> tuple[SharedMember, ...]:
        """The models a shared replica answers for; none for an ordinary model."""
        return ()

    # Engines

    def engine_profile(self, name: str) -> EngineProfile | None:
        """A profile as the agent starts it, or None when the model has no such profile."""
        p = self.profile_by_name(name)
        if p is None:
            return None
        return EngineProfile(
            name=p.name,
            engine=p.engine,
            gpu_class=p.gpu_class,
            tp=p.tp,
            pp=p.pp,
            gpus_per_node=p.gpus_per_node,
            nodes=p.nodes,
            args=p.args,
            env=self._engine_env(p),
            model_path=self.source_of(p),
            served_model_name=self.name,
            adapters=tuple(EngineAdapter(a.name, a.source) for a in self.adapters),
            kv_events=p.kv_events,
            cpu_cores=p.cpu_cores,
            startup_timeout=p.startup_timeout,
        ).with_runtime_lora(self.max_loaded_adapters)

    def _engine_env(self, p: Profile) -> dict[str, str]:
        """The profile's env plus what the catalog hands a ComfyUI replica's agent."""
        env = dict(p.env)
        if p.engine != ENGINE_COMFYUI:
            return env
        nodes = self.comfy_nodes_for(p)
        if nodes:
            env[NODES_ENV] = _compact([n.model_dump(mode="json", exclude_defaults=True) for n in nodes])
        members = self.shared_members()
        if members:
            env[SHARED_MODELS_ENV] = _compact(
                [m.model_dump(mode="json", exclude_defaults=True) for m in members]
            )
        if self.comfyui is not None and self.comfyui.huggingface_repo:
            env[HF_REPO_ENV] = self.comfyui.huggingface_repo
        return env


def _compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
