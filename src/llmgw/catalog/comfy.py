"""ComfyUI's side of the catalog: what a workflow makes, what it takes from a request,
and the workflows llmgw carries built in.

A workflow is ComfyUI's API-format JSON with placeholders: `{{checkpoint}}` is filled
with the file the model loads, and `{{name}}` with the request's value for each input.
A model names a built-in by its name, or a JSON file on the control plane by its path;
the file is read where the router runs, so only a name is checked here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from llmgw.catalog.quoting import q
from llmgw.core.strict import Strict

OUTPUT_PICTURES = "pictures"
OUTPUT_MESHES = "meshes"
OUTPUT_VIDEO = "video"
OUTPUT_AUDIO = "audio"
OUTPUT_FILES = "files"

OUTPUTS: tuple[str, ...] = (OUTPUT_PICTURES, OUTPUT_MESHES, OUTPUT_VIDEO, OUTPUT_AUDIO, OUTPUT_FILES)
"""What a ComfyUI model may make. Pictures are asked for at /v1/images/generations,
meshes as a job at /v1/3d/generations, and every kind as a job at /v1/workflows/runs."""

INPUT_TYPES: tuple[str, ...] = ("text", "integer", "number", "boolean", "image")

RESERVED_INPUTS: tuple[str, ...] = ("checkpoint",)
"""Placeholders the catalog fills itself, which a request must not be able to set."""

_INPUT_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


class Input(Strict):
    """A value a workflow takes from a request, put where `{{name}}` is written."""

    name: str = ""
    type: str = ""
    """text (the default), integer, number, boolean or image."""
    required: bool = False
    default: str | int | float | bool | None = None
    description: str = ""

    @property
    def kind(self) -> str:
        """The input's type, with the default filled in."""
        return self.type or "text"

    def problems(self) -> list[str]:
        """What is wrong with the input, as sentence tails naming the field and the fix."""
        label = f"comfyui input {q(self.name)}"
        if not _INPUT_NAME.match(self.name):
            return [f"{label}: the name is lowercase letters, digits and '_', starting with a letter"]
        if self.name in RESERVED_INPUTS:
            return [f"{label}: {{{{{self.name}}}}} is filled by the catalog; give the input another name"]
        if self.kind not in INPUT_TYPES:
            return [f"{label}: type {q(self.type)} is not one of {', '.join(INPUT_TYPES)}"]
        if self.default is None:
            return []
        if self.required:
            return [f"{label}: an input with a default is never missing; drop required or the default"]
        if not _fits(self.kind, self.default):
            return [f"{label}: default {q(self.default)} is not a value of type {self.kind}"]
        return []


def _fits(kind: str, value: str | int | float | bool) -> bool:
    if kind == "text":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return False  # an image has no default: the request brings it


@dataclass(frozen=True)
class Builtin:
    """A workflow llmgw carries, and what it takes and makes."""

    name: str
    output: str
    inputs: tuple[Input, ...]


def _flux_inputs(steps: int, *extra: Input) -> tuple[Input, ...]:
    return (
        Input(name="prompt", required=True, description="What to draw."),
        Input(name="seed", type="integer", description="Repeats a picture; random when absent."),
        Input(name="width", type="integer", default=1024),
        Input(name="height", type="integer", default=1024),
        Input(name="steps", type="integer", default=steps),
        *extra,
    )


BUILTINS: tuple[Builtin, ...] = (
    # FLUX.1 schnell is distilled to four steps: fast enough to be the default.
    Builtin("flux-schnell", OUTPUT_PICTURES, _flux_inputs(4)),
    Builtin(
        "flux-dev",
        OUTPUT_PICTURES,
        _flux_inputs(20, Input(name="guidance", type="number", default=3.5)),
    ),
)

DEFAULT_WORKFLOW = "flux-schnell"


def builtin_names() -> tuple[str, ...]:
    """The built-in workflows' names."""
    return tuple(b.name for b in BUILTINS)


def builtin(name: str) -> Builtin | None:
    """The built-in called `name`, where empty is the default; None for any other."""
    for b in BUILTINS:
        if b.name == (name or DEFAULT_WORKFLOW):
            return b
    return None


def is_file(workflow: str) -> bool:
    """Whether a workflow names a JSON file rather than a built-in."""
    return "/" in workflow or "." in workflow


def workflow_problem(workflow: str) -> str | None:
    """A sentence tail when `workflow` names no built-in and is no file; None when fine."""
    if workflow == "" or is_file(workflow) or builtin(workflow) is not None:
        return None
    return (
        f"there is no built-in workflow {q(workflow)}; use one of {', '.join(builtin_names())}"
        " or the path of a JSON file in ComfyUI's API format"
    )
