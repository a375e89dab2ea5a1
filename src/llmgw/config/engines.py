"""Which inference engines every node installs, at which version, and the overrides
that give some nodes different ones.

Agents do the installing: they pick the build matching their hardware, verify it
against the upstream checksum and run it once before use, rather than relying on
whatever a machine happens to have. The functions here are pure: settings and a node's
description in, that node's engine versions out.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Annotated

from pydantic import AfterValidator, Field, model_validator

from llmgw.config.checks import Problem, refuse
from llmgw.core.strict import Strict
from llmgw.engines import ENGINES

DEFAULT_ENGINES: Mapping[str, str] = MappingProxyType({"llamacpp": "b10991", "vllm": "0.30.0"})
"""Versions this llmgw release was tested with, so every command-line flag it generates
is understood. vLLM goes only onto nodes with a supported NVIDIA GPU. SGLang is not
installed unless `engines` gives it a version."""

# Every engine but the simulated one, which is part of llmgw and installs nothing.
INSTALLABLE_ENGINES: tuple[str, ...] = tuple(e for e in ENGINES if e != "sim")


def _installable(versions: dict[str, str]) -> dict[str, str]:
    problems: list[Problem] = []
    for name in versions:
        if name not in INSTALLABLE_ENGINES:
            guess = difflib.get_close_matches(name, INSTALLABLE_ENGINES, n=1)
            hint = (
                f"did you mean {guess[0]}?" if guess else f"the engines are {', '.join(INSTALLABLE_ENGINES)}"
            )
            problems.append(Problem((name,), f"{name!r} is not an engine agents install: {hint}", name))
    refuse("Engines", problems)
    return versions


EngineVersions = Annotated[dict[str, str], AfterValidator(_installable)]
"""Engine to version; an empty version means none (installed by hand, or not at all)."""


class EngineOverride(Strict):
    """Engine versions for a subset of nodes, e.g. an older vLLM for V100 machines that
    newer CUDA no longer supports, or no vLLM at all on CPU-only hosts. A node is
    selected when it satisfies every selector present; at least one is required."""

    gpu_class: str = ""
    """Selects nodes having a GPU of this class, e.g. v100-32g."""
    nodes: tuple[str, ...] = ()
    """Selects nodes by id."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Selects nodes whose labels include all of these key/value pairs."""
    engines: EngineVersions = Field(default_factory=dict)
    """Applied on top of the cluster-wide versions; "" drops that engine."""

    def picks(self, node: str, classes: Iterable[str], labels: Mapping[str, str]) -> bool:
        """Whether this override applies to the node `node` with these GPU classes and labels."""
        if not (self.gpu_class or self.nodes or self.labels):
            return False
        if self.gpu_class and self.gpu_class not in classes:
            return False
        if self.nodes and node not in self.nodes:
            return False
        return all(labels.get(key) == value for key, value in self.labels.items())

    @model_validator(mode="after")
    def _does_something(self) -> EngineOverride:
        problems: list[Problem] = []
        if not (self.gpu_class or self.nodes or self.labels):
            problems.append(Problem((), "selects no node: add a gpu_class, nodes or labels"))
        if not self.engines:
            problems.append(
                Problem(("engines",), 'is empty: list at least one engine version, or "" to remove an engine')
            )
        refuse("EngineOverride", problems)
        return self


def _laid_over(base: dict[str, str], versions: Mapping[str, str]) -> dict[str, str]:
    for name, version in versions.items():
        if version:
            base[name] = version
        else:
            base.pop(name, None)
    return base


def wanted_engines(engines: Mapping[str, str]) -> dict[str, str]:
    """DEFAULT_ENGINES with the cluster's `engines` laid over it."""
    return _laid_over(dict(DEFAULT_ENGINES), engines)


def engines_for(
    engines: Mapping[str, str],
    overrides: Sequence[EngineOverride],
    node: str,
    classes: Iterable[str],
    labels: Mapping[str, str],
) -> dict[str, str]:
    """The engines one node should have: cluster versions, then each matching override
    in file order, so a later override wins."""
    classes = tuple(classes)
    out = wanted_engines(engines)
    for override in overrides:
        if override.picks(node, classes, labels):
            _laid_over(out, override.engines)
    return out
