"""The `comfyui:` blocks of a model and of a profile: which workflow a ComfyUI model
runs, the file it loads, what it makes, and the custom nodes it needs.

Custom nodes are code fetched from git and run inside every replica, so each is pinned:
an https repository at a full commit (a branch moves, and a node that changed under a
model is a model that changed unasked), with its Python requirements as package names
and version ranges only (an option or a URL would install from somewhere other than
PyPI), and its compiled parts as directories inside the repository.
"""

from __future__ import annotations

import posixpath
import re
from urllib.parse import urlsplit

from llmgw.catalog.comfy import Input
from llmgw.catalog.quoting import q
from llmgw.core.strict import Strict

NODES_ENV = "LLMGW_COMFYUI_NODES"
"""Carries a ComfyUI model's custom nodes, as JSON, to the agent."""
HF_REPO_ENV = "LLMGW_COMFYUI_HF_REPO"
"""Carries the repository a custom node loads the weights by name from."""
SHARED_MODELS_ENV = "LLMGW_COMFYUI_MODELS"
"""Carries a shared replica's members (name, source, repository) to the agent."""

_FULL_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_PACKAGE_SPEC = re.compile(
    r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9,._-]+\])?\s*([<>=!~]=?\s*[A-Za-z0-9.*+!_-]+\s*,?\s*)*$"
)
HF_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


class CustomNode(Strict):
    """A ComfyUI custom node from a git repository, pinned to a commit."""

    repo: str = ""
    """The repository, https only."""
    commit: str = ""
    """The full 40-hex commit the node is used at."""
    requirements: tuple[str, ...] = ()
    """PyPI packages it needs, by name and version range; installed beside the replica,
    never into ComfyUI's own environment, and first on its path."""
    build: tuple[str, ...] = ()
    """Directories of the repository that are Python packages to compile (C++ and CUDA
    extensions no index has), built per card kind and kept on the node."""

    def problems(self) -> list[str]:
        """What is wrong with the node, as sentence tails naming the field and the fix."""
        try:
            url = urlsplit(self.repo)
            https = url.scheme == "https" and bool(url.hostname) and url.username is None
        except ValueError:
            https = False
        if not https:
            return [f"custom node repo {q(self.repo)} is not an https repository address without credentials"]
        out: list[str] = []
        if not _FULL_COMMIT.match(self.commit):
            out.append(
                f"custom node {self.repo} commit {q(self.commit)} is not a full 40-hex commit;"
                " pin the commit itself, since a branch or tag can move"
            )
        for b in self.build:
            if not _inside(b):
                out.append(
                    f"custom node {self.repo} build {q(b)} is not a relative directory inside the repository"
                )
        for r in self.requirements:
            if not _PACKAGE_SPEC.match(r.strip()):
                out.append(
                    f"custom node {self.repo} requirement {q(r)} is not a package name with a version range,"
                    " like numpy>=1.26,<2"
                )
        return out


def _inside(directory: str) -> bool:
    """Whether a path names a directory within a repository, not above or beside it."""
    clean = posixpath.normpath(directory) if directory else ""
    return not (
        directory == ""
        or directory.startswith("/")
        or clean in (".", "..")
        or clean.startswith("../")
        or "\\" in directory
        or " " in directory
    )


class ComfyUI(Strict):
    """How a model whose profiles run ComfyUI makes what it makes. Not run by this version
    (`llmgw.config.inert`)."""

    workflow: str = ""
    """A built-in's name (flux-schnell, the default, or flux-dev) or a JSON file."""
    checkpoint: str = ""
    """The file {{checkpoint}} names: the source's own file name unless set, which a
    source that is a set of files must be."""
    output: str = ""
    """pictures (the default), meshes, video, audio or files."""
    inputs: tuple[Input, ...] = ()
    """What the workflow takes from a request at /v1/workflows/runs."""
    nodes: tuple[CustomNode, ...] = ()
    huggingface_repo: str = ""
    """The repository a custom node asks for the weights by (owner/name): the replica's
    weights are shown to it there, so nothing is fetched when it runs."""
    environment: str = ""
    """Models of one environment share a ComfyUI replica; empty is a replica of its own."""


class ProfileComfyUI(Strict):
    """A profile's own workflow, checkpoint and nodes, over the model's: an fp8 workflow
    where the card has fp8, an fp16 one where it has not."""

    workflow: str = ""
    checkpoint: str = ""
    nodes: tuple[CustomNode, ...] = ()


def merge_nodes(base: tuple[CustomNode, ...], over: tuple[CustomNode, ...]) -> tuple[CustomNode, ...]:
    """`base` with `over` laid on it: a node of the same repository is replaced, a new
    one added, in the order first named."""
    merged = {n.repo: n for n in base}
    for n in over:
        merged[n.repo] = n
    return tuple(merged.values())


class SharedMember(Strict):
    """One model a shared ComfyUI replica answers for: what the node fetches for it."""

    name: str = ""
    source: str = ""
    hf_repo: str = ""


class SharedComfy(Strict):
    """The members of an environment's shared replica. Made by the catalog, never read
    from a catalog file."""

    environment: str = ""
    members: tuple[SharedMember, ...] = ()
