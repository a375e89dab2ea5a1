"""The catalog as a whole: one namespace for names, aliases and adapters, fallbacks and
canaries resolved at load, and ComfyUI environments sharing a replica."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import ValidationError

from llmgw.catalog import SHARED_MODELS_ENV, Catalog, EnvironmentModel, Model
from llmgw.core.problems import describe_validation_error
from llmgw.errors import CatalogError

Valid = Callable[[str], dict[str, Any]]
Build = Callable[..., Catalog]


def problems_of(build: Build, *definitions: dict[str, Any]) -> tuple[str, ...]:
    with pytest.raises(CatalogError) as caught:
        build(*definitions)
    return caught.value.problems


def has(problems: tuple[str, ...], *fragments: str) -> bool:
    return any(all(f in p for f in fragments) for p in problems)


def test_resolve_by_name_alias_and_adapter(valid: Valid, build: Build) -> None:
    chat = valid("gpu")
    chat["adapters"] = [
        {"name": "chat-sql", "source": "mirror/sql/"},
        {"name": "chat-law", "source": "mirror/law/"},
    ]
    catalog = build(chat, valid("cpu"), valid("external"))
    assert len(catalog) == 3
    assert catalog.names() == ["chat", "gpt", "small"]
    assert [m.name for m in catalog.models()] == ["chat", "small", "gpt"]
    resolved = catalog.resolve("chat-latest")
    assert resolved is not None
    assert resolved.name == "chat"
    assert catalog.resolve("nope") is None
    assert catalog.aliases_of("chat-latest") == ["chat-latest"]
    assert catalog.aliases_of("small") == []
    assert catalog.aliases_of("nope") == []
    found = catalog.resolve_adapter("chat-law")
    assert found is not None
    model, adapter, index = found
    assert (model.name, adapter.source, index) == ("chat", "mirror/law/", 1)
    assert catalog.resolve_adapter("chat") is None
    assert "chat-latest" in catalog
    assert "chat-law" not in catalog


def test_models_are_normalised(valid: Valid, build: Build) -> None:
    (model,) = build(valid("gpu")).models()
    assert model.profiles[0].gpus_per_node == 2


def test_model_declared_twice(valid: Valid, build: Build) -> None:
    assert has(problems_of(build, valid("gpu"), valid("gpu")), 'model "chat" is declared twice', "keep one")


def test_alias_is_another_models_name(valid: Valid, build: Build) -> None:
    small = valid("cpu")
    small["aliases"] = ["chat"]
    assert has(problems_of(build, valid("gpu"), small), 'model "small": alias "chat"', "another model")


def test_alias_claimed_twice(valid: Valid, build: Build) -> None:
    small = valid("cpu")
    small["aliases"] = ["chat-latest"]
    problems = problems_of(build, valid("gpu"), small)
    assert has(problems, 'alias "chat-latest" is claimed by both model "chat" and model "small"')


@pytest.mark.parametrize("taken", ["small", "small-latest", "other-lora"])
def test_adapter_name_is_taken(taken: str, valid: Valid, build: Build) -> None:
    chat, small = valid("gpu"), valid("cpu")
    small["aliases"] = ["small-latest"]
    small["adapters"] = [{"name": "other-lora", "source": "mirror/o.gguf"}]
    chat["adapters"] = [{"name": taken, "source": "mirror/x/"}]
    problems = problems_of(build, small, chat)
    assert has(problems, 'model "chat": adapter', f'"{taken}"', "rename it")


def test_fallbacks_resolve_at_load(valid: Valid, build: Build) -> None:
    chat = valid("gpu")
    chat["fallbacks"] = ["gpt", "nope"]
    assert has(problems_of(build, chat, valid("external")), 'model "chat": fallback "nope"', "remove it")
    chat["fallbacks"] = ["gpt"]
    small = valid("cpu")
    small["fallbacks"] = ["chat-latest"]  # an alias is a name clients use, so it counts
    assert len(build(chat, small, valid("external"))) == 3


def test_a_fallback_is_never_a_guard_model(valid: Valid, build: Build) -> None:
    chat, judge = valid("gpu"), valid("guard")
    chat["fallbacks"] = [judge["name"]]
    assert has(problems_of(build, chat, judge), 'model "chat": fallback', "guard model", "serving model")


def _with_canary(valid: Valid, **canary: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    chat, candidate = valid("gpu"), valid("gpu")
    candidate["name"], candidate["aliases"] = "chat-next", []
    chat["canary"] = {"model": "chat-next", "percent": 10, **canary}
    return chat, candidate


def test_canary_of(valid: Valid, build: Build) -> None:
    chat, candidate = _with_canary(valid)
    catalog = build(chat, candidate)
    assert catalog.canary_of("chat-next") == "chat"
    assert catalog.canary_of("chat") is None


@pytest.mark.parametrize(
    ("change", "fragments"),
    [
        ("missing", ['model "chat": canary.model "ghost"', "add the candidate"]),
        ("self", ['model "chat": canary.model names the model itself']),
        ("guard", ['model "chat": canary.model "judge" is a guard model']),
        ("nested", ['model "chat": canary.model "chat-next" has a canary of its own']),
        ("shared", ['model "small": "chat-next" is already the canary of model "chat"']),
        ("percent", ['model "chat": canary.percent 150', "between 0 and 100"]),
    ],
)
def test_canary_rules(change: str, fragments: list[str], valid: Valid, build: Build) -> None:
    chat, candidate = _with_canary(valid)
    others: list[dict[str, Any]] = []
    if change == "missing":
        chat["canary"]["model"] = "ghost"
    elif change == "self":
        chat["canary"]["model"] = "chat-latest"
    elif change == "guard":
        chat["canary"]["model"] = "judge"
        others.append(valid("guard"))
    elif change == "nested":
        others.append(valid("cpu"))
        candidate["canary"] = {"model": "small", "percent": 5}
    elif change == "shared":
        small = valid("cpu")
        small["canary"] = {"model": "chat-next", "percent": 5}
        others.append(small)
    else:
        chat["canary"]["percent"] = 150
    assert has(problems_of(build, chat, candidate, *others), *fragments)


def test_every_problem_of_every_model_is_reported(valid: Valid, build: Build) -> None:
    chat, small = valid("gpu"), valid("cpu")
    chat["fallbacks"] = ["ghost"]
    chat["class"] = "gold"
    small["profiles"][0]["nodes"] = 2
    problems = problems_of(build, chat, small, valid("gpu"))
    assert has(problems, 'fallback "ghost"')
    assert has(problems, 'class "gold"')
    assert has(problems, 'model "small" profile "cpu"', "one node")
    assert has(problems, 'model "chat" is declared twice')


def test_shared_is_not_readable_from_yaml(valid: Valid) -> None:
    definition = valid("comfy")
    definition["shared"] = {"environment": "x", "members": []}
    with pytest.raises(ValidationError) as caught:
        Model.model_validate(definition)
    assert describe_validation_error(caught.value, Model, ("models", 0)) == [
        "models[0].shared: unknown key; the keys models[0] takes are: "
        + ", ".join(sorted(Model.model_fields))
    ]


def _pictures(valid: Valid, name: str, commit: str, environment: str = "flux") -> dict[str, Any]:
    d = valid("comfy")
    d["name"] = name
    d["source"] = f"mirror/{name}.safetensors"
    d["comfyui"]["environment"] = environment
    d["comfyui"]["nodes"][0]["commit"] = commit
    return d


def test_environment_adds_one_hidden_entry(valid: Valid, build: Build, commit: str) -> None:
    a, b = _pictures(valid, "a", commit), _pictures(valid, "b", commit)
    b["scaling"] = {"min": 1}
    catalog = build(a, b, _pictures(valid, "alone", commit, environment="solo"))
    models = catalog.models()
    assert [m.name for m in models] == ["a", "b", "alone", "env:flux"]
    hidden = models[-1]
    assert isinstance(hidden, EnvironmentModel)
    assert hidden.is_environment
    assert not models[0].is_environment
    assert [m.name for m in hidden.shared_members()] == ["a", "b"]
    assert (hidden.scaling.min, hidden.scaling.max) == (1, 1)
    profile = hidden.engine_profile("l40s")
    assert profile is not None
    members = json.loads(profile.env[SHARED_MODELS_ENV])
    assert members == [
        {"name": "a", "source": "mirror/a.safetensors"},
        {"name": "b", "source": "mirror/b.safetensors"},
    ]
    # Handed back in, the hidden entry is dropped and made again, not doubled.
    again = Catalog.build(catalog.models())
    assert [m.name for m in again.models()] == [m.name for m in models]


def test_environment_members_must_pin_nodes_alike(valid: Valid, build: Build, commit: str) -> None:
    other = "f" * 40
    problems = problems_of(build, _pictures(valid, "a", commit), _pictures(valid, "b", other))
    assert has(
        problems, 'model "b": comfyui environment "flux"', "custom node https://github.com/o/n", 'model "a"'
    )


def test_environment_members_need_the_same_profiles(valid: Valid, build: Build, commit: str) -> None:
    b = _pictures(valid, "b", commit)
    b["profiles"][0]["gpu_class"] = "h100-80g"
    problems = problems_of(build, _pictures(valid, "a", commit), b)
    assert has(problems, 'model "b": comfyui environment "flux"', "profiles differ", "same profiles")


def test_environment_entry_name_is_reserved(valid: Valid, build: Build, commit: str) -> None:
    squatter = valid("cpu")
    squatter["name"] = "env:flux"
    problems = problems_of(build, _pictures(valid, "a", commit), _pictures(valid, "b", commit), squatter)
    assert has(problems, 'model "env:flux"', 'environment "flux"', "rename")


def test_catalog_renders_for_ctl(valid: Valid, build: Build) -> None:
    text = str(build(valid("gpu")))
    assert text.splitlines()[0] == "chat (min 1, max 2)"
    assert "h100-80g" in text
    assert "tp=2 nodes=1 priority=0" in text
