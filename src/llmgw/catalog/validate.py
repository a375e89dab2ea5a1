"""The rules a normalised model must meet before the catalog takes it.

Each refusal is one sentence that names the model (and profile), the field, the value
and the fix. Rules that do not depend on one another are all reported, so one edit can
fix everything the operator wrote wrong; a rule whose subject is already known to be
broken (the profiles of a model with no source, say) is not piled on.
"""

from __future__ import annotations

from datetime import timedelta

from llmgw.catalog.adapters import adapter_problems
from llmgw.catalog.classes import CLASSES, valid_class
from llmgw.catalog.guard_formats import FORMATS, known_format
from llmgw.catalog.model import Model
from llmgw.catalog.normalize import repository_page
from llmgw.catalog.parts import ROLE_GUARD
from llmgw.catalog.quoting import q
from llmgw.catalog.scaling import MAX_PREWARM
from llmgw.catalog.validate_comfyui import comfyui_problems
from llmgw.catalog.validate_profile import profile_problems

OWNER_SCOPES: tuple[str, ...] = ("org", "team", "project")


def validate(m: Model, *, served_statically: bool = False) -> list[str]:
    """Every problem of a normalised model, one sentence each; empty when it is fine.

    `served_statically` is a model that static `endpoints:` serve (router-only mode):
    nothing is placed for it, so it needs neither profiles nor a source of weights.
    """
    if not m.name:
        return ["a model has no name: give it name:, the name clients ask for it by"]
    who = f"model {q(m.name)}"
    if served_statically and not m.profiles and m.external is None:
        return [*_policy_problems(m), *_scaling_problems(m)]
    if not m.source:
        return [f"{who}: source is required: the weights to load, a path on the mirror or a Hugging Face id"]
    out: list[str] = []
    if m.license is not None:
        out.extend(f"{who}: {problem}" for problem in m.license.problems())
    out.extend(_source_problems(m))
    out.extend(adapter_problems(m.name, m.adapters, m.max_loaded_adapters, m.profiles, m.is_external))
    if m.external is not None:
        out.extend(f"{who}: {problem}" for problem in m.external.problems(len(m.profiles)))
    elif not m.profiles:
        out.append(f"{who}: at least one profile is required, or external: for a model served elsewhere")
    out.extend(comfyui_problems(m))
    out.extend(_policy_problems(m))
    out.extend(_scaling_problems(m))
    out.extend(_profiles_problems(m))
    return out


def _source_problems(m: Model) -> list[str]:
    who = f"model {q(m.name)}"
    out: list[str] = []
    # A page is not weights: a node fetches its HTML as one file and the engine fails at
    # start on a path that looks right. Normalising already read it as the repository
    # for the engines that download one; only a source llama.cpp must load is left.
    repo = repository_page(m.source)
    if repo is not None and not m.profiles:
        out.append(
            f"{who}: source {m.source} is a Hugging Face repository page, not weights; give the id {repo}"
        )
    elif repo is not None:
        out.append(
            f"{who}: source {m.source} is a Hugging Face repository page, not a file, and llama.cpp needs"
            f" a .gguf: mirror one from {repo} and give its source"
        )
    for p in m.profiles:
        own = repository_page(p.source)
        if own is not None:
            out.append(
                f"{who} profile {q(p.name)}: source {p.source} is a Hugging Face repository page, not a file,"
                f" and llama.cpp needs a .gguf: mirror one from {own} and give its source"
            )
        if p.source and m.external is not None:
            out.append(f"{who} profile {q(p.name)}: an external model loads no weights; remove the source")
    return out


def _policy_problems(m: Model) -> list[str]:
    who = f"model {q(m.name)}"
    out: list[str] = []
    scope, sep, ident = m.owner.partition(":")
    if m.owner and not (sep and ident and scope in OWNER_SCOPES):
        out.append(
            f"{who}: owner {q(m.owner)} is not org:ID, team:ID or project:ID; leave it empty for shared"
        )
    if not valid_class(m.class_):
        out.append(f"{who}: class {q(m.class_)} is not one of {', '.join(reversed(CLASSES))}")
    if m.eval is not None:
        if not m.eval.suite.strip():
            out.append(f"{who}: eval.suite is required: the suite new weights must pass")
        if not 0 <= m.eval.min_score <= 1:
            out.append(f"{who}: eval.min_score {m.eval.min_score:g} is not between 0 and 1")
    if m.context_length < 0 or m.max_output < 0:
        out.append(f"{who}: context_length and max_output are token counts, 0 or more; 0 is unknown")
    elif 0 < m.context_length < m.max_output:
        out.append(
            f"{who}: max_output {m.max_output} is above context_length {m.context_length}, which counts the"
            " prompt and the completion together; lower max_output"
        )
    out.extend(_role_problems(m))
    return out


def _role_problems(m: Model) -> list[str]:
    who = f"model {q(m.name)}"
    formats = ", ".join(FORMATS)
    if m.role == "":
        if m.guard is not None:
            return [f"{who}: guard: is for a model with role: guard; add the role or remove the block"]
        return []
    if m.role != ROLE_GUARD:
        return [f"{who}: role {q(m.role)} is not guard, the only role there is; remove it for a served model"]
    if m.guard is None:
        return [f"{who}: a guard model needs guard.format, one of {formats}"]
    out: list[str] = []
    if not known_format(m.guard.format):
        out.append(f"{who}: guard.format {q(m.guard.format)} is not one of {formats}")
    if m.scaling.on_demand:
        # A judge loaded on demand makes the first request after every idle period wait
        # for it, or go unjudged.
        out.append(f"{who}: a guard model must always run; set scaling.min to 1 or more")
    if m.is_external:
        out.append(f"{who}: a guard model judges inside the cluster; it cannot be external")
    return out


def _scaling_problems(m: Model) -> list[str]:
    who = f"model {q(m.name)}"
    s = m.scaling
    out = [
        f"{who}: scaling.schedule[{i}]: {problem}"
        for i, w in enumerate(s.schedule)
        for problem in w.problems()
    ]
    if not timedelta(0) <= s.prewarm <= MAX_PREWARM:
        out.append(
            f"{who}: scaling.prewarm is between 0 and 12h;"
            " a window opened earlier than that is a longer window"
        )
    if s.idle_timeout < timedelta(0):
        out.append(
            f"{who}: scaling.idle_timeout is negative; give a duration like 30m, or 0 for the cluster's"
        )
    if s.max < s.min:
        out.append(f"{who}: scaling.max {s.max} is below scaling.min {s.min}; raise max or lower min")
    return out


def _profiles_problems(m: Model) -> list[str]:
    who = f"model {q(m.name)}"
    out: list[str] = []
    seen: set[str] = set()
    for i, p in enumerate(m.profiles):
        if not p.name:
            out.append(f"{who}: profiles[{i}] has no name; give it name:, like h100 or cpu")
            continue
        if p.name in seen:
            out.append(f"{who}: profile {q(p.name)} is declared twice; give each profile its own name")
            continue
        seen.add(p.name)
        out.extend(profile_problems(m, p))
    return out
