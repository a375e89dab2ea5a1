"""Turns pydantic's validation errors into the sentences an operator reads.

Each problem names its full path in the document (`router.timeouts.dial`,
`models[2].profiles[0].tp`), says what is wrong with the value, and, for an unknown key,
the nearest key that does exist there: a typo must never become a setting that
silently does not apply.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

# pydantic's error types, as a person would say them; anything else keeps its own message.
_PHRASES: dict[str, str] = {
    "missing": "is required",
    "int_parsing": "is not a whole number",
    "int_type": "is not a whole number",
    "int_from_float": "is not a whole number",
    "float_parsing": "is not a number",
    "float_type": "is not a number",
    "bool_parsing": "is not true or false",
    "bool_type": "is not true or false",
    "string_type": "is not text",
    "list_type": "is not a list",
    "tuple_type": "is not a list",
    "dict_type": "is not a mapping of keys to values",
    "model_type": "is not a mapping of keys to values",
    "model_attributes_type": "is not a mapping of keys to values",
}


def render_path(loc: Sequence[int | str]) -> str:
    """`('models', 2, 'profiles', 0, 'tp')` as `models[2].profiles[0].tp`."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model class a field holds, looking through Optional, list, tuple and dict."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _model_in(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType, list, tuple, dict, set, frozenset) or (
        origin is not None and getattr(origin, "__module__", "") == "collections.abc"
    ):
        for arg in typing.get_args(annotation):
            found = _model_in(arg)
            if found is not None:
                return found
    return None


def _holder_of(root: type[BaseModel], loc: Sequence[int | str]) -> type[BaseModel] | None:
    """The model class whose keys are valid at `loc` (the parent of its last part)."""
    current: type[BaseModel] | None = root
    for part in loc[:-1]:
        if current is None:
            return None
        if isinstance(part, int):
            continue
        field = current.model_fields.get(part)
        if field is None:
            # A dict's key (engines: {vllm: ...}) leaves us on the same value type.
            continue
        current = _model_in(field.annotation)
    return current


def _nearest(word: str, candidates: Sequence[str]) -> str | None:
    matches = difflib.get_close_matches(word, candidates, n=1, cutoff=0.6)
    return matches[0] if matches else None


def describe_validation_error(
    error: ValidationError, root: type[BaseModel], prefix: Sequence[int | str] = ()
) -> list[str]:
    """Every problem in `error` as one sentence, paths rendered from `root`."""
    problems: list[str] = []
    for item in error.errors(include_url=False):
        loc = tuple(item["loc"])
        path = render_path((*prefix, *loc))
        kind = item["type"]
        if kind == "extra_forbidden":
            holder = _holder_of(root, loc)
            known = list(holder.model_fields) if holder is not None else []
            guess = _nearest(str(loc[-1]), known)
            parent = render_path((*prefix, *loc[:-1]))
            if guess is not None:
                hint = f"did you mean {render_path((*prefix, *loc[:-1], guess))}?"
            elif known:
                hint = f"the keys {parent} takes are: {', '.join(sorted(known))}"
            else:
                hint = "remove it"
            problems.append(f"{path}: unknown key; {hint}")
            continue
        if kind in ("value_error", "assertion_error"):
            message = str(item.get("ctx", {}).get("error", item["msg"]))
        elif kind in _PHRASES:
            shown = item.get("input")
            message = _PHRASES[kind] if kind == "missing" else f"{shown!r} {_PHRASES[kind]}"
        else:
            message = item["msg"]
        problems.append(f"{path}: {message}")
    return problems
