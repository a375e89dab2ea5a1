"""The `LLMGW_` environment overlay: `LLMGW_ROUTER__RETRIES=3` sets `router.retries`.

pydantic-settings does the reading: the prefix, "__" between levels, names in any case,
JSON for lists and mappings (`LLMGW_ROUTER__TAG_LABELS='["team","app"]'`). What it
does not do is refuse a variable whose path names nothing; it skips it, and a typo'd
variable would look set while changing nothing. So every variable with "__" is walked
against the settings tree first, and an unknown step is refused with the nearest key.

A variable without "__" that names no top-level key is left alone: other parts of llmgw
read their own `LLMGW_` variables (the engines' `LLMGW_COMFYUI_NODES`, for one).
"""

from __future__ import annotations

import difflib
import json
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel
from pydantic_settings import BaseSettings, EnvSettingsSource, SettingsError

from llmgw.config.checks import Loc


class _GivenEnvironment(EnvSettingsSource):
    """pydantic-settings' environment source, reading the mapping it is handed instead of
    the process's, so a caller (and every test) decides what it sees."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        self._given = {name.lower(): value for name, value in environ.items()}
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return self._given


@dataclass(frozen=True)
class Overlay:
    """The settings the environment sets, and which variable set each path."""

    values: dict[str, Any] = field(default_factory=dict)
    origins: dict[Loc, str] = field(default_factory=dict)
    problems: tuple[str, ...] = ()
    """Variables refused, one sentence each; the overlay holds the others."""

    def origin_of(self, loc: Loc) -> str | None:
        """The variable that set `loc` or a mapping above it."""
        for depth in range(len(loc), 0, -1):
            found = self.origins.get(loc[:depth])
            if found is not None:
                return found
        return None


def read_environment(settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> Overlay:
    """The overlay `environ` lays on the settings, with a problem for every variable
    refused (which is then left out, so the rest can still be checked)."""
    prefix = str(settings_cls.model_config.get("env_prefix", ""))
    delimiter = str(settings_cls.model_config.get("env_nested_delimiter", ""))
    problems: list[str] = []
    origins: dict[Loc, str] = {}
    accepted: dict[str, str] = {}
    for name, value in sorted(environ.items()):
        if not name.upper().startswith(prefix.upper()):
            continue
        steps = name[len(prefix) :].lower().split(delimiter)
        if len(steps) == 1 and steps[0] not in settings_cls.model_fields:
            continue
        problem = _walk(settings_cls, steps, value, prefix, delimiter)
        if problem:
            problems.append(f"{name}: {problem}")
        else:
            origins[tuple(steps)] = name
            accepted[name] = value
    try:
        values = _GivenEnvironment(settings_cls, accepted)()
    except SettingsError as exc:  # a value the walk above could not foresee
        return Overlay({}, {}, (*problems, f"{prefix} variables: {exc}"))
    return Overlay(values, origins, tuple(problems))


def _walk(root: type[BaseModel], steps: list[str], value: str, prefix: str, delimiter: str) -> str | None:
    """Why the path `steps` cannot be set from a variable, or None when it can."""
    current: Any = root
    for depth, step in enumerate(steps):
        here = ".".join(steps[:depth]) or "the top level"
        if not step:
            return f"has an empty step between {delimiter!r}: write {prefix}SECTION{delimiter}KEY"
        model = _model_class(current)
        if model is not None:
            if step not in model.model_fields:
                known = list(model.model_fields)
                guess = difflib.get_close_matches(step, known, n=1, cutoff=0.6)
                if guess:
                    better = delimiter.join([*steps[:depth], guess[0], *steps[depth + 1 :]]).upper()
                    return f"{here} has no key {step!r}; did you mean {prefix}{better}?"
                return f"{here} has no key {step!r}; its keys are {', '.join(sorted(known))}"
            current = model.model_fields[step].annotation
            continue
        mapping_value = _mapping_value(current)
        if mapping_value is not None:
            current = mapping_value
            continue
        if _is_sequence(current):
            whole = prefix + delimiter.join(steps[:depth]).upper()
            return f"{here} is a list, set whole: give {whole} as JSON"
        return f"{here} takes no keys below it: set {prefix}{delimiter.join(steps[:depth]).upper()} itself"
    if _is_complex(current):
        try:
            json.loads(value)
        except ValueError:
            path = ".".join(steps)
            return f'{path} is a list or mapping: write it as JSON, like ["a", "b"] or {{"key": 1}}'
    return None


def _strip(annotation: Any) -> Any:
    """The type inside Annotated[...] and X | None."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            options = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(options) != 1:
                return annotation
            annotation = options[0]
        else:
            return annotation


def _model_class(annotation: Any) -> type[BaseModel] | None:
    annotation = _strip(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _mapping_value(annotation: Any) -> Any:
    annotation = _strip(annotation)
    origin = typing.get_origin(annotation)
    if isinstance(origin, type) and issubclass(origin, Mapping):
        args = typing.get_args(annotation)
        return args[1] if len(args) == 2 else Any
    return None


def _is_sequence(annotation: Any) -> bool:
    origin = typing.get_origin(_strip(annotation))
    return origin in (list, tuple, set, frozenset)


def _is_complex(annotation: Any) -> bool:
    return (
        _model_class(annotation) is not None
        or _mapping_value(annotation) is not None
        or _is_sequence(annotation)
    )
