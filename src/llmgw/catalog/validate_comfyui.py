"""The rules for a model whose profiles run ComfyUI.

Such a model answers requests for pictures, meshes or other files, not text, so either
all of its profiles run ComfyUI or none does: a request for a picture cannot be
answered by an engine that writes text.
"""

from __future__ import annotations

import re

from llmgw.catalog import comfy
from llmgw.catalog.comfyui import HF_REPO, CustomNode
from llmgw.catalog.model import ENGINE_COMFYUI, Model
from llmgw.catalog.quoting import q

_ENVIRONMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


def comfyui_problems(m: Model) -> list[str]:
    """Every problem of a ComfyUI model, each a sentence naming the model."""
    who = f"model {q(m.name)}"
    comfy_profiles = sum(p.engine == ENGINE_COMFYUI for p in m.profiles)
    if comfy_profiles == 0:
        if m.comfyui is not None:
            return [f"{who}: comfyui: is for a model whose profiles run engine comfyui; remove it"]
        return []
    if comfy_profiles != len(m.profiles):
        return [
            f"{who}: every profile runs engine comfyui or none does, since a request for pictures"
            " cannot be answered by an engine that writes text; split it into two models"
        ]
    out: list[str] = []
    if m.adapters:
        out.append(f"{who}: ComfyUI serves no LoRA adapters through the catalog; remove adapters")
    block = m.comfyui
    workflow = block.workflow if block else ""
    problem = comfy.workflow_problem(workflow)
    if problem is not None:
        out.append(f"{who}: comfyui.workflow: {problem}")
    out.extend(_node_problems(who, block.nodes if block else ()))
    for p in m.profiles:
        if p.comfyui is None:
            continue
        pwho = f"{who} profile {q(p.name)}"
        problem = comfy.workflow_problem(p.comfyui.workflow)
        if problem is not None:
            out.append(f"{pwho}: comfyui.workflow: {problem}")
        out.extend(_node_problems(pwho, p.comfyui.nodes))
    output = m.comfy_output
    if output not in comfy.OUTPUTS:
        out.append(f"{who}: comfyui.output {q(output)} is not one of {', '.join(comfy.OUTPUTS)}")
    elif output != comfy.OUTPUT_PICTURES and not workflow:
        out.append(f"{who}: comfyui.output is {output}, which no built-in workflow makes; name its workflow")
    if block is not None and block.huggingface_repo and not HF_REPO.match(block.huggingface_repo):
        out.append(f"{who}: comfyui.huggingface_repo {q(block.huggingface_repo)} is not owner/name")
    if block is not None and block.environment and not _ENVIRONMENT.match(block.environment):
        out.append(
            f"{who}: comfyui.environment {q(block.environment)} is not a name of"
            " letters, digits, '.', '_' and '-'"
        )
    out.extend(_input_problems(who, m.comfy_inputs()))
    for p in m.profiles:
        if not m.comfy_workflow(p)[1]:
            out.append(
                f"{who}: its source is a directory of files, so comfyui.checkpoint must name the one"
                " the workflow loads"
            )
            break
    return out


def _node_problems(who: str, nodes: tuple[CustomNode, ...]) -> list[str]:
    out = [f"{who}: {problem}" for n in nodes for problem in n.problems()]
    repos = [n.repo for n in nodes]
    out.extend(
        f"{who}: custom node {r} is listed twice; keep one"
        for r in sorted({r for r in repos if repos.count(r) > 1})
    )
    return out


def _input_problems(who: str, inputs: tuple[comfy.Input, ...]) -> list[str]:
    out = [f"{who}: {problem}" for i in inputs for problem in i.problems()]
    names = [i.name for i in inputs]
    out.extend(
        f"{who}: comfyui input {q(n)} is declared twice; keep one"
        for n in sorted({n for n in names if names.count(n) > 1})
    )
    return out
