"""The runtime catalog on a SQLite store: entries laid over the configuration's models,
tombstones, scale, refusals worded exactly as the configuration's loader words them,
nothing written when refused, and the watcher that picks changes up."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from llmgw.catalog import Catalog
from llmgw.config import Settings, settings_from_yaml
from llmgw.control.runtime.catalog_watch import CatalogWatcher
from llmgw.core.yamlio import dump_yaml
from llmgw.errors import CatalogError, ConfigError, StoreConflict, StoreMissing
from llmgw.store import Store
from llmgw.store.catalog_store import CatalogStore, StoredModel, layer, parse_definition
from support.control_store import CHAT, SMALL, Definition, ManualClock, definition, settings

BIG: Definition = {
    "name": "big",
    "source": "meta-llama/Llama-3.1-70B-Instruct",
    "profiles": [{"name": "h100", "engine": "vllm", "gpu_class": "h100-80g", "tp": 4}],
    "scaling": {"min": 0, "max": 1},
}


def run(
    tmp_path: Path, config: Settings, scenario: Callable[[CatalogStore, ManualClock], Awaitable[None]]
) -> None:
    async def main() -> None:
        store = await Store.open(str(tmp_path / "llmgw.db"))
        clock = ManualClock()
        try:
            await scenario(CatalogStore(store, config, clock), clock)
        finally:
            await store.close()

    asyncio.run(main())


def text(d: Definition) -> str:
    return dump_yaml(d)


def config_problems(*models: Definition) -> list[str]:
    """What `llmgw server` says of a file with these models, without the file's name and
    the `models` it files catalog problems under."""
    with pytest.raises(ConfigError) as refused:
        settings_from_yaml(dump_yaml({"models": list(models)}), source="c.yaml", environ={})
    # A definition on its own is its own root: `models[1].scaling` there is `scaling` here.
    return [
        p.removeprefix("c.yaml: ")
        .removeprefix("models: ")
        .replace("models[1].", "")
        .replace("models[0].", "")
        for p in refused.value.problems
    ]


@pytest.mark.parametrize(
    ("case", "bad"),
    [
        ("max below min", definition(BIG, scaling={"min": 3, "max": 1})),
        ("vllm without a gpu", definition(BIG, profiles=[{"name": "cpu", "engine": "vllm"}])),
        (
            "a type",
            definition(
                BIG, profiles=[{"name": "h100", "engine": "vllm", "gpu_class": "h100-80g", "tp": "x"}]
            ),
        ),
        ("a typo", definition(BIG, scalng={"min": 1}, scaling=None)),
        ("a dangling fallback", definition(BIG, fallbacks=["nope"])),
    ],
)
def test_a_refused_definition_says_what_the_configuration_would(
    tmp_path: Path, case: str, bad: Definition
) -> None:
    expected = config_problems(SMALL, bad)

    async def scenario(catalogs: CatalogStore, clock: ManualClock) -> None:
        with pytest.raises(CatalogError) as refused:
            await catalogs.add(text(bad), "ops")
        assert list(refused.value.problems) == expected, case
        assert await catalogs.entries() == [], "a refused definition never reaches the store"

    run(tmp_path, settings(SMALL), scenario)


def test_json_is_taken_as_written(tmp_path: Path) -> None:
    async def scenario(catalogs: CatalogStore, clock: ManualClock) -> None:
        written = json.dumps(BIG, indent=1)
        runtime = await catalogs.add(written, "ops")
        assert runtime.changed == "big"
        [entry] = await catalogs.entries()
        assert entry == StoredModel("big", written, clock.now, "ops")

    run(tmp_path, settings(SMALL), scenario)


def test_entries_add_replace_and_remove_by_name(tmp_path: Path) -> None:
    async def scenario(catalogs: CatalogStore, clock: ManualClock) -> None:
        runtime = await catalogs.add(text(BIG), "ann")
        assert [(e.model.name, e.origin) for e in runtime.layers] == [
            ("small", "config"),
            ("chat", "config"),
            ("big", "store"),
        ]
        runtime = await catalogs.replace("small", text(definition(SMALL, description="edited")), "bob")
        small = runtime.origin("small")
        assert small is not None
        assert (small.origin, small.model.description, small.updated_by) == (
            "store over config",
            "edited",
            "bob",
        )
        assert runtime.layers[0].model.name == "small", "a replacement keeps the configured model's place"
        runtime = await catalogs.remove("big", "ann")
        assert "big" not in runtime.catalog
        assert [e.name for e in await catalogs.entries()] == ["small"], "a store-only model's row goes"
        loaded = await catalogs.load()
        assert loaded.catalog.names() == ["chat", "small"]

    run(tmp_path, settings(SMALL, CHAT), scenario)


def test_removing_a_configured_model_leaves_a_tombstone(tmp_path: Path) -> None:
    async def scenario(catalogs: CatalogStore, clock: ManualClock) -> None:
        runtime = await catalogs.remove("chat", "ann")
        assert runtime.catalog.names() == ["small"]
        assert await catalogs.entries() == [StoredModel("chat", None, clock.now, "ann")]
        with pytest.raises(StoreMissing, match='model "chat" is not in the catalog'):
            await catalogs.remove("chat", "ann")
        clock.advance(1)
        runtime = await catalogs.add(text(CHAT), "ann")  # back, over the tombstone
        chat = runtime.origin("chat")
        assert chat is not None
        assert chat.origin == "store over config"

    run(tmp_path, settings(SMALL, CHAT), scenario)


def test_removing_what_another_model_falls_back_to_is_refused(tmp_path: Path) -> None:
    async def scenario(catalogs: CatalogStore, clock: ManualClock) -> None:
        with pytest.raises(CatalogError) as refused:
            await catalogs.remove("small", "ann")
        assert list(refused.value.problems) == [
            'model "chat": fallback "small" is not a model or alias in the catalog; fix the name or remove it'
        ]
        assert await catalogs.entries() == []

    run(tmp_path, settings(SMALL, CHAT), scenario)


def test_names_are_checked_against_what_is_in_force(tmp_path: Path) -> None:
    async def scenario(catalogs: CatalogStore, clock: ManualClock) -> None:
        with pytest.raises(
            StoreConflict, match='model "small" exists already; change it with `llmgw ctl model edit'
        ):
            await catalogs.add(text(SMALL), "ann")
        with pytest.raises(StoreMissing, match='model "big" is not in the catalog'):
            await catalogs.replace("big", text(BIG), "ann")
        with pytest.raises(CatalogError, match='name: "big" differs from the model being edited, "small"'):
            await catalogs.replace("small", text(BIG), "ann")
        with pytest.raises(CatalogError, match="name: is required"):
            await catalogs.add(text(definition(BIG, name=None)), "ann")
        with pytest.raises(CatalogError, match="must be a mapping"):
            await catalogs.add("- just\n- a list\n", "ann")
        with pytest.raises(ConfigError, match="the model definition:2: YAML syntax error"):
            await catalogs.add("name: x\n  bad: [\n", "ann")
        assert await catalogs.entries() == []

    run(tmp_path, settings(SMALL), scenario)


def test_scale_sets_min_and_max_and_keeps_the_rest(tmp_path: Path) -> None:
    async def scenario(catalogs: CatalogStore, clock: ManualClock) -> None:
        runtime = await catalogs.scale("chat", 0, 4, "ann")
        chat = runtime.catalog.resolve("chat")
        assert chat is not None
        assert (chat.scaling.min, chat.scaling.max, chat.fallbacks) == (0, 4, ("small",))
        with pytest.raises(CatalogError) as refused:
            await catalogs.scale("chat", 5, 2, "ann")
        assert list(refused.value.problems) == config_problems(
            SMALL, definition(CHAT, scaling={"min": 5, "max": 2})
        )
        scaled = (await catalogs.load()).catalog.resolve("chat")
        assert scaled is not None
        assert (scaled.scaling.min, scaled.scaling.max) == (0, 4)
        with pytest.raises(StoreMissing):
            await catalogs.scale("nope", 1, 1, "ann")

    run(tmp_path, settings(SMALL, CHAT), scenario)


def test_the_version_names_the_content_even_when_the_clock_goes_back(tmp_path: Path) -> None:
    async def scenario(catalogs: CatalogStore, clock: ManualClock) -> None:
        seen = {await catalogs.version(): await catalogs.entries()}
        changes: tuple[tuple[int, Callable[[], Awaitable[object]]], ...] = (
            (1, lambda: catalogs.add(text(BIG), "a")),
            (1, lambda: catalogs.scale("big", 1, 1, "a")),
            (1, lambda: catalogs.remove("big", "a")),  # deletes the row: only the count tells
            (-60, lambda: catalogs.remove("small", "a")),  # another server, its clock behind
            (0, lambda: catalogs.add(text(BIG), "a")),
        )
        for step, change in changes:
            clock.advance(step)
            await change()
            version, entries = await catalogs.version(), await catalogs.entries()
            assert seen.setdefault(version, entries) == entries, "one version, two contents"
        assert len(seen) == 5, "the empty table came back once, as the same version"

    run(tmp_path, settings(SMALL), scenario)


def test_the_watcher_applies_each_change_once(tmp_path: Path) -> None:
    async def scenario(catalogs: CatalogStore, clock: ManualClock) -> None:
        applied: list[Catalog] = []
        watcher = CatalogWatcher(catalogs, applied.append, timedelta(seconds=5))
        assert await watcher.check(), "the first look applies the catalog in force"
        assert not await watcher.check()
        await catalogs.add(text(BIG), "a")
        assert await watcher.check()
        assert not await watcher.check()
        assert [c.names() for c in applied] == [["small"], ["big", "small"]]

    run(tmp_path, settings(SMALL), scenario)


def test_layering_is_a_pure_function_of_config_and_entries() -> None:
    configured = settings(SMALL, CHAT).models
    stored = [
        StoredModel("zeta", text(definition(BIG, name="zeta")), 1, "a"),
        StoredModel("chat", None, 1, "a"),
        StoredModel("alpha", text(definition(BIG, name="alpha")), 1, "a"),
    ]
    assert [(e.model.name, e.origin) for e in layer(configured, stored)] == [
        ("small", "config"),
        ("alpha", "store"),
        ("zeta", "store"),
    ]
    with pytest.raises(CatalogError, match=r'stored model "bad": scaling\.min: .* is not a whole number'):
        layer(
            configured, [StoredModel("bad", text(definition(BIG, name="bad", scaling={"min": "x"})), 1, "a")]
        )


def test_parse_definition_reads_yaml_1_2(tmp_path: Path) -> None:
    windowed: dict[str, Any] = definition(
        BIG, scaling={"min": 0, "max": 1, "schedule": [{"from": "08:30", "to": "18:00", "min": 1}]}
    )
    model = parse_definition(dump_yaml(windowed).replace("'08:30'", "08:30"))
    assert model.scaling.schedule[0].from_ == "08:30", "YAML 1.1 would have read 08:30 as 510"
