"""The settings this build validates and then does nothing with, and which of them a
configuration uses.

The settings are the whole specification, so a file written for a feature that has not
landed yet still loads. An operator who sets one of those must be told it has no effect,
or the file promises what the server does not do. `INERT` is the one table of them:
a field path (`router.cache`, `models[].license`: `[]` stands for any item of a list,
or any value of a mapping) and one sentence saying what does not happen. An entry
covers the fields beneath it. The table shrinks as features land;
tests/unit/config/test_inert.py fails when a field is neither read by runtime code nor
listed here.

`inert_in_use(settings, catalog)` is a pure function: the entries a configuration uses,
each with the concrete path it is used at (`models[chat].license`). A setting is in use
when it differs from its default.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import BaseModel, ValidationError

if TYPE_CHECKING:
    from llmgw.catalog import Catalog
    from llmgw.config.server import Settings

_NOT_ENFORCED = "not enforced by this version"

INERT: Mapping[str, str] = {
    # Identity and sign-in.
    # Web pages.
    # Installing and updating.
    "mirror": "the mirror API is not used by this version; nothing is fetched from or served by it",
    "offline.checksums": "this version verifies no release checksums",
    "engines": "agents do not install engines in this version; install them yourself",
    "engine_overrides": "agents do not install engines in this version; no override is applied",
    "releases": "this version has no `llmgw ctl upgrade`; nothing is downloaded from releases",
    # Security features not built yet.
    "agent_tls.server_name": "the server does not use it: agents check the name they dial",
    "endpoints[].pool": "this version shows the pool nowhere and routes no differently by it",
    # The router's features not built yet.
    "router.trusted_proxies": "X-Forwarded-For is not read by this version; clients are seen by "
    "their socket address",
    # The control plane's features not built yet.
    "facility.measured_fresh": "measured power draw is not read by this version; placement counts "
    "declared watts",
    "federation": "federation with other clusters is not available in this version",
    # Catalog fields.
    "models[].license": "license terms are " + _NOT_ENFORCED + "; nothing is shown or refused",
    "models[].query_prefix": "this version does not prepend the query prefix to embedding queries",
    "models[].comfyui": "ComfyUI workflows are not run by this version",
    "models[].profiles[].comfyui": "ComfyUI workflows are not run by this version",
    "models[].external.peer": "federation with other clusters is not available in this version",
    "models[].external.api": "this version speaks the OpenAI API to every external provider; "
    "comfyui is not supported",
    "models[].external.workflow": "ComfyUI workflows are not run by this version",
    "models[].external.output": "ComfyUI workflows are not run by this version",
    "models[].profiles[].kv_events": "the router subscribes only to static endpoints' kv_events in this "
    "version; for placed replicas the engine only opens the port",
    "models[].origin.repo": "this version fetches weights from `source` only; the recorded "
    "repository is not read",
    "models[].origin.revision": "this version checks the weights' files only; the recorded revision "
    "is not read",
}


@dataclass(frozen=True)
class InertSetting:
    """One inert setting a configuration uses: where, and what does not happen."""

    path: str
    """Where it is used: `router.cache`, `models[chat].license`."""
    entry: str
    """The `INERT` entry it falls under: `models[].license`."""
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"

    def as_json(self) -> dict[str, str]:
        return {"path": self.path, "setting": self.entry, "message": self.message}


def covers(entry: str, pattern: str) -> bool:
    """Whether the `INERT` entry `entry` covers the field path `pattern`."""
    return pattern == entry or pattern.startswith((entry + ".", entry + "[]"))


def entry_for(pattern: str) -> str | None:
    """The `INERT` entry covering the field path `pattern`, if any."""
    for entry in INERT:
        if covers(entry, pattern):
            return entry
    return None


def inert_in_use(settings: Settings, catalog: Catalog | None = None) -> list[InertSetting]:
    """Every inert setting `settings` and `catalog` (None: the settings' own) use, one per
    concrete path, in document order."""
    found: list[InertSetting] = []
    for pattern, path in _differing(settings, "", "", skip=("models",)):
        if pattern in INERT:
            found.append(InertSetting(path, pattern, INERT[pattern]))
    models = (catalog or settings.catalog()).models()
    for model in models:
        if model.is_environment:
            continue
        for pattern, path in _differing(model, "models[]", f"models[{model.name}]"):
            if pattern in INERT:
                found.append(InertSetting(path, pattern, INERT[pattern]))
    return found


def _differing(
    value: BaseModel, pattern: str, path: str, *, skip: tuple[str, ...] = ()
) -> Iterator[tuple[str, str]]:
    """(pattern, concrete path) of every field of `value` that differs from its default,
    a section before the fields beneath it."""
    base = _default_of(type(value))
    for name, field in type(value).model_fields.items():
        if name in skip:
            continue
        current = getattr(value, name)
        default = getattr(base, name) if base is not None else field.get_default(call_default_factory=True)
        if current == default:
            continue
        label = field.alias or name
        here, where = _join(pattern, name), _join(path, label)
        yield here, where
        if isinstance(current, BaseModel):
            yield from _differing(current, here, where)
        elif isinstance(current, tuple):
            for index, item in enumerate(current):
                if isinstance(item, BaseModel):
                    yield from _differing(item, here + "[]", f"{where}[{index}]")
        elif isinstance(current, dict):
            for key, item in current.items():
                if isinstance(item, BaseModel):
                    yield from _differing(item, here + "[]", f"{where}[{key}]")


def _default_of(cls: type[BaseModel]) -> BaseModel | None:
    """`cls` with every default, validated as a file would be; None where a model
    refuses to exist empty (then each field's declared default stands in)."""
    try:
        return cls.model_validate({})
    except ValidationError:
        return None


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name
