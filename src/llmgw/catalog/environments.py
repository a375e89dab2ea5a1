"""ComfyUI environments: several ComfyUI models carried by one replica.

ComfyUI moves between checkpoints itself, so models that agree on their custom nodes
can share a replica instead of each holding cards of its own. Models name the same
`comfyui.environment`; the catalog checks they agree and adds a hidden entry,
`env:<environment>`, that stands for the shared replica: its profiles are the members'
(which must have the same shape, or no one replica could carry them all), its custom
nodes every member's, and its `shared` block the members' weights, which the agent
fetches for the replica. An environment of one model is just that model.
"""

from __future__ import annotations

from collections.abc import Sequence

from llmgw.catalog.classes import class_rank
from llmgw.catalog.comfyui import ComfyUI, CustomNode, SharedComfy, SharedMember
from llmgw.catalog.model import Model
from llmgw.catalog.profile import Profile
from llmgw.catalog.quoting import q
from llmgw.catalog.scaling import Scaling

ENVIRONMENT_PREFIX = "env:"


class EnvironmentModel(Model):
    """The hidden catalog entry of a shared ComfyUI replica. Made by the catalog only;
    a definition handed back to `Catalog.build` is dropped and made again."""

    shared: SharedComfy

    @property
    def is_environment(self) -> bool:
        return True

    def shared_members(self) -> tuple[SharedMember, ...]:
        return self.shared.members


def environment_name(environment: str) -> str:
    """The hidden entry's name for an environment."""
    return f"{ENVIRONMENT_PREFIX}{environment}"


def group_environments(models: Sequence[Model]) -> dict[str, list[Model]]:
    """ComfyUI models of the cluster by the environment they name, in declaration order."""
    groups: dict[str, list[Model]] = {}
    for m in models:
        if m.external is None and m.serves_comfyui and m.comfyui is not None and m.comfyui.environment:
            groups.setdefault(m.comfyui.environment, []).append(m)
    return groups


def _all_nodes(m: Model) -> list[CustomNode]:
    nodes = list(m.comfyui.nodes if m.comfyui else ())
    for p in m.profiles:
        nodes.extend(p.comfyui.nodes if p.comfyui else ())
    return nodes


def _shape(p: Profile) -> tuple[object, ...]:
    return (p.name, p.engine, p.gpu_class, p.gpu, p.tp, p.pp, p.gpus_per_node, p.nodes)


def environment_problems(environment: str, members: Sequence[Model]) -> list[str]:
    """Why these models cannot share one replica, one sentence per disagreement."""
    out: list[str] = []
    first = members[0]
    pinned: dict[str, tuple[str, CustomNode]] = {}
    for m in members:
        for node in _all_nodes(m):
            held = pinned.setdefault(node.repo, (m.name, node))
            if held[1] != node:
                out.append(
                    f"model {q(m.name)}: comfyui environment {q(environment)}: custom node {node.repo}"
                    f" differs from model {q(held[0])}'s (commit, requirements or build);"
                    " models sharing a replica must pin each node alike"
                )
        if m is not first and [_shape(p) for p in m.profiles] != [_shape(p) for p in first.profiles]:
            out.append(
                f"model {q(m.name)}: comfyui environment {q(environment)}: its profiles differ from model"
                f" {q(first.name)}'s; models sharing a replica need the same profiles (names, cards, widths)"
            )
    return out


def environment_model(environment: str, members: Sequence[Model]) -> EnvironmentModel:
    """The hidden entry standing for the replica `members` share."""
    first = members[0]
    nodes: dict[str, CustomNode] = {}
    for m in members:
        for node in _all_nodes(m):
            nodes.setdefault(node.repo, node)
    shared = SharedComfy(
        environment=environment,
        members=tuple(
            SharedMember(
                name=m.name, source=m.source, hf_repo=m.comfyui.huggingface_repo if m.comfyui else ""
            )
            for m in members
        ),
    )
    # The replica is kept as long as any member wants it, and is worth what its most
    # valuable member is worth.
    scaling = Scaling(min=max(m.scaling.min for m in members), max=max(m.scaling.max for m in members))
    top_class = max((m.effective_class for m in members), key=class_rank)
    return EnvironmentModel(
        name=environment_name(environment),
        description=f"The shared ComfyUI replica of {', '.join(m.name for m in members)}.",
        source=first.source,
        profiles=tuple(p.model_copy(update={"comfyui": None}) for p in first.profiles),
        scaling=scaling,
        class_=top_class,
        comfyui=ComfyUI(nodes=tuple(nodes.values()), environment=environment),
        shared=shared,
    )
