"""The runtime catalog on a real PostgreSQL shared by two stores, as two servers share
it: changes made at the same moment take turns, so two that are each valid alone never
both land when together they would break the catalog; and one server's watcher picks up
the other's change."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta

from llmgw.catalog import Catalog
from llmgw.control.runtime.catalog_watch import CatalogWatcher
from llmgw.core.yamlio import dump_yaml
from llmgw.errors import CatalogError, StoreConflict
from llmgw.store import Store
from llmgw.store.catalog_store import CatalogStore, RuntimeCatalog
from support.control_store import CHAT, SMALL, definition, settings

CONFIG = settings(SMALL)


def run(location: str, scenario: Callable[[CatalogStore, CatalogStore], Awaitable[None]]) -> None:
    async def main() -> None:
        first = await Store.open(location)
        second = await Store.open(location)
        try:
            await scenario(CatalogStore(first, CONFIG), CatalogStore(second, CONFIG))
        finally:
            await first.close()
            await second.close()

    asyncio.run(main())


async def outcomes(*changes: Awaitable[RuntimeCatalog]) -> list[str]:
    results = await asyncio.gather(*changes, return_exceptions=True)
    return sorted(type(r).__name__ for r in results)


def test_the_same_name_added_on_two_servers_at_once_lands_once(pg_location: str) -> None:
    async def scenario(one: CatalogStore, two: CatalogStore) -> None:
        for i in range(5):
            name = f"twin-{i}"
            texts = [dump_yaml(definition(CHAT, name=name, description=who)) for who in ("one", "two")]
            got = await outcomes(one.add(texts[0], "one"), two.add(texts[1], "two"))
            assert got == ["RuntimeCatalog", StoreConflict.__name__]
        assert len(await one.entries()) == 5

    run(pg_location, scenario)


def test_a_removal_and_a_fallback_to_it_cannot_both_land(pg_location: str) -> None:
    async def scenario(one: CatalogStore, two: CatalogStore) -> None:
        base = dump_yaml(definition(SMALL, name="base"))
        for i in range(5):
            await one.add(base, "setup")
            leaning = dump_yaml(definition(CHAT, name=f"leaning-{i}", fallbacks=["base"]))
            got = await outcomes(one.remove("base", "one"), two.add(leaning, "two"))
            assert got == [CatalogError.__name__, "RuntimeCatalog"]
            runtime = await one.load()  # whatever landed, the stored catalog is valid
            if "base" in runtime.catalog:
                await one.remove(f"leaning-{i}", "cleanup")
                await one.remove("base", "cleanup")

    run(pg_location, scenario)


def test_a_change_on_one_server_reaches_the_others_watcher(pg_location: str) -> None:
    async def scenario(one: CatalogStore, two: CatalogStore) -> None:
        applied: list[Catalog] = []
        watcher = CatalogWatcher(two, applied.append, timedelta(milliseconds=20))
        assert await watcher.check()
        await one.add(dump_yaml(CHAT), "one")
        watcher.start()
        try:
            for _ in range(250):
                if len(applied) == 2:
                    break
                await asyncio.sleep(0.02)
        finally:
            await watcher.close()
        assert [c.names() for c in applied] == [["small"], ["chat", "small"]]

    run(pg_location, scenario)
