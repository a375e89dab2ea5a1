"""Filling in what a model definition left out, so the rules and every reader after
them see one shape.

Only what the seed catalog always filled is filled: an empty engine is vLLM, one tensor
rank, one node, twenty minutes to load, weight 1, max equal to min when min is set. A
max of 0 with min 0 is left alone: it says the model is configured and deliberately
not running, and filling it would turn every switched-off model into an on-demand one.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from llmgw.catalog.profile import Profile
from llmgw.catalog.scaling import Scaling

DEFAULT_ENGINE = "vllm"
DEFAULT_STARTUP_TIMEOUT = timedelta(minutes=20)

_HF_HOSTS: tuple[str, ...] = ("https://huggingface.co/", "http://huggingface.co/", "https://hf.co/")


def repository_page(source: str) -> str | None:
    """The repository id when `source` is a Hugging Face repository's page
    (https://huggingface.co/org/repo, or one of its tree views) rather than a file under
    /resolve/; None otherwise."""
    for host in _HF_HOSTS:
        if not source.startswith(host):
            continue
        parts = source[len(host) :].strip("/").split("/")
        if len(parts) < 2 or (len(parts) > 2 and parts[2] == "resolve"):
            return None
        return f"{parts[0]}/{parts[1]}"
    return None


def normalize_scaling(s: Scaling) -> Scaling:
    """Scaling with a negative min raised to 0 and max filled from a positive min."""
    low = max(s.min, 0)
    high = low if s.max == 0 and low > 0 else s.max
    return s.model_copy(update={"min": low, "max": high})


def normalize_profile(p: Profile) -> Profile:
    """A profile with its defaults filled in."""
    engine = p.engine or DEFAULT_ENGINE
    tp, pp, nodes, per_node = max(p.tp, 1), p.pp, max(p.nodes, 1), p.gpus_per_node
    # tp on a llama.cpp GPU profile, written before gpus_per_node meant anything to it,
    # is read as the width it was meant as: that many cards of one node. Only both
    # given and disagreeing is refused later, as ambiguous. A profile naming its card
    # by need is read the same way, as it is checked the same way.
    if engine == "llamacpp" and (p.gpu_class or p.gpu is not None) and (tp > 1 or pp > 1) and nodes == 1:
        width = tp * max(pp, 1)
        if per_node in (0, width):
            per_node, tp, pp = width, 1, 0
    shaped = p.model_copy(update={"engine": engine, "tp": tp, "pp": pp, "nodes": nodes})
    if shaped.cpu_only:
        per_node = 0  # it asks for no cards at all
    elif per_node <= 0:
        per_node = max(tp // nodes, 1)
    return shaped.model_copy(
        update={
            "gpus_per_node": per_node,
            "startup_timeout": p.startup_timeout
            if p.startup_timeout > timedelta(0)
            else DEFAULT_STARTUP_TIMEOUT,
            "weight": p.weight if p.weight > 0 else 1.0,
        }
    )


def normalize_sources(source: str, profiles: Sequence[Profile]) -> tuple[str, tuple[Profile, ...]]:
    """A repository page read as the repository for engines that download one themselves
    (the page fetched as a file is HTML, and the engine failed at start). A source that
    llama.cpp loads is left as written: it needs a file, and the rules say so."""
    repo = repository_page(source)
    llamacpp_loads_it = any(p.engine == "llamacpp" and not p.source for p in profiles)
    if repo is not None and profiles and not llamacpp_loads_it:
        source = repo
    out: list[Profile] = []
    for p in profiles:
        own = repository_page(p.source)
        out.append(p.model_copy(update={"source": own}) if own is not None and p.engine != "llamacpp" else p)
    return source, tuple(out)
