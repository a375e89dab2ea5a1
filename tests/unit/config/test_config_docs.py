"""docs/configuration.md describes every key there is, under the section it belongs to,
and no key that is not there: a setting added without its documentation fails here."""

from __future__ import annotations

import re
import typing
from pathlib import Path

from pydantic import BaseModel

from llmgw.config import Settings

DOCS = Path(__file__).resolve().parents[3] / "docs" / "configuration.md"
_HEADING = re.compile(r"^### `([^`]+)`", re.MULTILINE)
_ROW = re.compile(r"^\| `([a-z0-9_]+)` \|", re.MULTILINE)


def _settings_model(annotation: object) -> type[BaseModel] | None:
    candidates = [annotation, *typing.get_args(annotation)]
    for candidate in candidates:
        if (
            isinstance(candidate, type)
            and issubclass(candidate, BaseModel)
            and candidate.__module__.startswith("llmgw.config")
        ):
            return candidate
    return None


def _expected() -> dict[str, set[str]]:
    sections: dict[str, set[str]] = {}
    pending: list[tuple[str, type[BaseModel]]] = [("(top level)", Settings)]
    while pending:
        path, model = pending.pop()
        sections[path] = set(model.model_fields)
        for name, field in model.model_fields.items():
            inner = _settings_model(field.annotation)
            if inner is not None:
                pending.append((name if path == "(top level)" else f"{path}.{name}", inner))
    return sections


def _documented() -> dict[str, set[str]]:
    text = DOCS.read_text(encoding="utf-8")
    reference = text[text.index("## Reference") :]
    headings = list(_HEADING.finditer(reference))
    out: dict[str, set[str]] = {}
    for here, following in zip(headings, [*headings[1:], None], strict=True):
        end = following.start() if following is not None else len(reference)
        out[here.group(1)] = set(_ROW.findall(reference[here.end() : end]))
    return out


def test_every_section_and_key_is_documented() -> None:
    assert _documented() == _expected()
