"""Every setting is read by runtime code or listed as inert (llmgw.config.inert), and a
configuration is told which inert settings it uses.

"Read by runtime code" is decided from the source: the field's name accessed as an
attribute (`.name`, or the `.effective_name` convention) somewhere under src/llmgw
outside config/ and catalog/, which define and validate the settings rather than act on
them, and sim/, the simulated engine, a program of its own. A name shared by two
fields counts for both: the scan catches a field nobody reads under any name, and the
review of `INERT` catches the rest (three such were found by reading: endpoints[].pool,
models[].external.api, models[].origin.revision). A field read only through a helper
of its own model is listed in `READ_THROUGH`, with the reader that is itself read. A
setting added with no reader and no `INERT` entry fails
`test_every_field_is_read_or_inert`.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from llmgw.catalog import Model
from llmgw.config import Settings, settings_from_mapping
from llmgw.config.inert import INERT, covers, entry_for, inert_in_use

SRC = Path(__file__).resolve().parents[3] / "src" / "llmgw"
# config/ and catalog/ define and validate the settings; sim/ is a separate program
# (the simulated engine) whose own attributes share many names with settings.
_NOT_READERS = ("config", "catalog", "sim")

READ_THROUGH: Mapping[str, str] = {
    # A field of a settings model read by a method of that model, which runtime code calls.
    "admin_remote": "config.rules permits a non-loopback admin_listen only with it; that is its whole effect",
    "auth.pricing": "Auth.price(model), called by the auth gate for budgets",
    "auth.default_price": "Auth.price(model), called by the auth gate for budgets",
    "facility.budgets[].domain": "Facility.policy(), which the control plane's placement reads",
    "models[].class_": "Model.effective_class, read by the plan's preemption",
    "models[].scaling.schedule[].days": "ScaleWindow.holds, called through Scaling.window by control.desired",
    "backup_recipients": "Settings.backup_recipient_keys(), which llmgw.backup.write encrypts to",
}


def _models_in(annotation: object) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def _is_container(annotation: object) -> bool:
    origin = typing.get_origin(annotation)
    if origin in (tuple, list, dict):
        return True
    return any(_is_container(arg) for arg in typing.get_args(annotation))


def field_paths(
    model: type[BaseModel], prefix: str = "", seen: frozenset[type] = frozenset()
) -> Iterator[str]:
    """Every field of `model` and the models beneath it, as `a.b[].c` paths."""
    for name, field in model.model_fields.items():
        path = f"{prefix}.{name}" if prefix else name
        yield path
        for inner in _models_in(field.annotation):
            if inner not in seen:
                below = path + ("[]" if _is_container(field.annotation) else "")
                yield from field_paths(inner, below, seen | {inner})


def all_paths() -> list[str]:
    settings = [p for p in field_paths(Settings) if not p.startswith("models")]
    return settings + list(field_paths(Model, "models[]"))


@cache
def _runtime_source() -> str:
    files = [p for p in SRC.rglob("*.py") if p.relative_to(SRC).parts[0] not in _NOT_READERS]
    return "\n".join(p.read_text(encoding="utf-8") for p in files)


def is_read(path: str) -> bool:
    name = re.split(r"[.\[\]]+", path.rstrip("[]"))[-1]
    found = re.search(rf"\.(effective_)?{re.escape(name)}\b", _runtime_source())
    return found is not None


def test_every_field_is_read_or_inert() -> None:
    orphans = [p for p in all_paths() if not is_read(p) and entry_for(p) is None and p not in READ_THROUGH]
    assert orphans == [], (
        "these settings have no reader in src/llmgw and no entry in llmgw.config.inert.INERT: "
        "act on them, or list them as inert with what does not happen"
    )


def test_every_inert_entry_names_a_field() -> None:
    paths = set(all_paths())
    assert [entry for entry in INERT if entry not in paths] == []


def test_read_through_entries_name_fields_with_no_direct_reader() -> None:
    # An entry that is read directly, or is inert, no longer needs explaining.
    paths = set(all_paths())
    stale = [p for p in READ_THROUGH if p not in paths or is_read(p) or entry_for(p) is not None]
    assert stale == []


def test_the_scan_sees_a_field_nothing_reads() -> None:
    # The check above must be able to fail: a name no runtime module mentions.
    assert not is_read("router.no_such_setting_anywhere")
    assert is_read("router.max_body_bytes")


def test_an_entry_covers_the_fields_beneath_it_only() -> None:
    assert covers("mirror", "mirror.tls.cert_file")
    assert covers("models[].comfyui", "models[].comfyui.nodes[].repo")
    assert not covers("router.cache", "router.cache_ttl")
    assert not covers("guard.default", "guard")


def _load(document: dict[str, Any]) -> Settings:
    return settings_from_mapping(document, source="test.yaml", environ={})


_ROUTER_ONLY: dict[str, Any] = {"endpoints": [{"id": "a", "url": "http://127.0.0.1:1", "models": ["m"]}]}


def test_a_router_only_file_using_nothing_inert_gets_no_warning() -> None:
    assert inert_in_use(_load(_ROUTER_ONLY)) == []


def test_guardrails_are_enforced_so_their_settings_are_not_inert() -> None:
    document = {"guard": {"policies": [{"name": "p", "checks": [_REGEX]}], "default": "p"}}
    assert inert_in_use(_load({**_ROUTER_ONLY, **document})) == []


def test_a_setting_left_at_its_default_is_not_in_use() -> None:
    assert inert_in_use(_load({**_ROUTER_ONLY, "guard": {"default": ""}, "threads": {}})) == []


_REGEX = {"type": "regex", "patterns": ["x"]}


@pytest.mark.parametrize(
    ("document", "path"),
    [
        ({"router": {"trusted_proxies": ["10.0.0.0/8"]}}, "router.trusted_proxies"),
        ({"releases": "https://mirror.example/llmgw"}, "releases"),
        ({"mirror": {"update_check": "1h"}}, "mirror"),
    ],
)
def test_one_warning_per_inert_setting_in_use(document: dict[str, Any], path: str) -> None:
    found = inert_in_use(_load({**_ROUTER_ONLY, **document}))
    assert [f.path for f in found] == [path]
    assert str(found[0]).startswith(f"{path}: ")
    assert found[0].message == INERT[found[0].entry]


def test_a_catalog_field_is_named_by_its_model() -> None:
    profile = {"name": "gpu", "engine": "vllm", "gpu_class": "l40s-48g", "kv_events": True}
    model = {
        "name": "chat",
        "source": "org/chat",
        "profiles": [profile],
        "eval": {"suite": "arithmetic"},
    }
    candidate = {"name": "chat-next", "source": "org/chat-next", "profiles": [profile]}
    found = inert_in_use(_load({**_ROUTER_ONLY, "models": [model, candidate]}))
    assert [f.path for f in found if f.path.startswith("models")] == [
        "models[chat].profiles[0].kv_events",
        "models[chat-next].profiles[0].kv_events",
    ]


def test_the_firewall_acts_and_is_named_by_no_warning() -> None:
    # The agents keep llmgw's nft table: on, off or widened, nothing is inert.
    assert inert_in_use(_load({})) == []
    assert inert_in_use(_load({"firewall": {"enabled": False}})) == []
    assert inert_in_use(_load({"firewall_networks": ["10.9.0.0/16"]})) == []


def test_the_documentation_lists_exactly_the_inert_settings() -> None:
    docs = (SRC.parents[1] / "docs" / "configuration.md").read_text(encoding="utf-8")
    section = docs[docs.index("## Settings this version does not act on") :]
    section = section[: section.index("\n## ")]
    rows = dict(re.findall(r"^\| `([^`]+)` \| (.+) \|$", section, re.MULTILINE))
    assert rows == dict(INERT)
