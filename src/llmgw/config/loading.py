"""Reading the settings the way the server does, and writing back what they amount to.

The order is the defaults, then the YAML file over them, then the `LLMGW_` environment
over that, merged key by key so that one variable changes one setting. Every problem
found is reported at once, each naming where it came from: the file, or the variable.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from llmgw.config.environment import Overlay, read_environment
from llmgw.config.server import Settings
from llmgw.core.problems import describe_validation_error
from llmgw.core.yamlio import dump_yaml, load_yaml
from llmgw.errors import ConfigError


def load_settings(path: Path | None, environ: Mapping[str, str] | None = None) -> Settings:
    """The settings from `path` (None: the defaults) with `environ`'s overlay (None: the
    process environment). Raises ConfigError listing every problem, a missing or
    unreadable file included."""
    env: Mapping[str, str] = os.environ if environ is None else environ
    if path is None:
        return settings_from_mapping({}, source="", environ=env)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError([f"{path}: no such configuration file"]) from None
    except IsADirectoryError:
        raise ConfigError([f"{path}: is a directory; give the configuration file inside it"]) from None
    except UnicodeDecodeError as exc:
        raise ConfigError([f"{path}: not UTF-8 text (byte {exc.start}); save the file as UTF-8"]) from None
    except OSError as exc:
        raise ConfigError([f"{path}: cannot be read: {exc.strerror or exc}"]) from None
    return settings_from_yaml(text, source=str(path), environ=env)


def settings_from_yaml(text: str, *, source: str, environ: Mapping[str, str]) -> Settings:
    """The settings in a YAML document; `source` names it in problems."""
    document = load_yaml(text, source)
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise ConfigError(
            [f"{source}: the top level must be settings by name (listen:, router:…), not {_kind(document)}"]
        )
    return settings_from_mapping(document, source=source, environ=environ)


def settings_from_mapping(
    document: Mapping[str, Any], *, source: str, environ: Mapping[str, str]
) -> Settings:
    """The settings in an already parsed document, with the environment's overlay."""
    overlay = read_environment(Settings, environ)
    merged = _merge(_without_nulls(document), overlay.values)
    try:
        settings = Settings.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError([*overlay.problems, *_attributed(exc, source, overlay)]) from None
    if overlay.problems:
        raise ConfigError(overlay.problems)
    return settings


def render_effective(settings: Settings) -> str:
    """The settings in force as YAML: every default filled in, the environment applied,
    models as the catalog normalised them, durations written like 1h30m. Loading the
    result gives the same settings back."""
    document = settings.model_dump(mode="json")
    # Fields left at their default are omitted from models to keep them readable; the
    # catalog's hidden entries are its own making and would be refused if written back.
    document["models"] = [
        model.model_dump(mode="json", exclude_defaults=True, exclude_none=True, by_alias=True)
        for model in settings.catalog().models()
        if not model.is_environment
    ]
    return dump_yaml(document)


def _attributed(error: ValidationError, source: str, overlay: Overlay) -> list[str]:
    sentences = describe_validation_error(error, Settings)
    items = error.errors(include_url=False)
    if len(sentences) != len(items):
        return [f"{source}: {s}" if source else s for s in sentences]
    out = []
    for item, sentence in zip(items, sentences, strict=True):
        origin = overlay.origin_of(tuple(item["loc"])) or source
        out.append(f"{origin}: {sentence}" if origin else sentence)
    return out


def _without_nulls(value: Any) -> Any:
    """A key given as null (`auth:` with nothing under it) keeps its default, as an
    absent key does."""
    if isinstance(value, Mapping):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        below = out.get(key)
        if isinstance(value, Mapping) and isinstance(below, Mapping):
            out[key] = _merge(below, value)
        else:
            out[key] = value
    return out


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "text"
    return f"the value {value!r}"
