"""Reading owners' GPU quotas from a real (SQLite) store: the quotas set on orgs, teams
and projects, the tree above the catalog's owners, and the watch handing on a change
once, keeping the quotas in force when nothing changed."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

from llmgw.control.decisions.quotas import NO_QUOTAS, Quotas
from llmgw.control.runtime.quota_watch import QuotaWatch, read_quotas
from llmgw.store import Scope, Store


async def _tree(store: Store) -> None:
    for scope in (
        Scope("org", "o", created_at=1, updated_at=1),
        Scope("team", "t", parent="o", created_at=1, updated_at=1),
        Scope("team", "u", parent="o", created_at=1, updated_at=1),
        Scope("project", "p", parent="t", created_at=1, updated_at=1),
    ):
        await store.tenancy.create(scope)


def test_no_quota_set_reads_as_none(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = await Store.open(str(tmp_path / "s.db"))
        try:
            await _tree(store)
            assert await read_quotas(store.tenancy, {"project:p", "team:u"}) == NO_QUOTAS
        finally:
            await store.close()

    asyncio.run(scenario())


def test_quotas_come_with_the_tree_above_the_catalogs_owners(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = await Store.open(str(tmp_path / "s.db"))
        try:
            await _tree(store)
            await store.tenancy.update("org", "o", {"gpu_quota": 8}, now=2)
            await store.tenancy.update("team", "t", {"gpu_quota": 0}, now=2)
            found = await read_quotas(store.tenancy, {"project:p", "team:u", "project:gone", "org:o"})
            assert dict(found.limits) == {"org:o": 8, "team:t": 0}
            assert dict(found.parents) == {"project:p": "team:t", "team:t": "org:o", "team:u": "org:o"}
            assert (await store.tenancy.get("team", "t")).gpu_quota == 0
        finally:
            await store.close()

    asyncio.run(scenario())


def test_the_watch_hands_on_a_change_once(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = await Store.open(str(tmp_path / "s.db"))
        applied: list[Quotas] = []
        watch = QuotaWatch(store.tenancy, lambda: {"team:u"}, applied.append, timedelta(seconds=60))
        try:
            await _tree(store)
            assert not await watch.check()  # none set: nothing to hand on
            await store.tenancy.update("team", "u", {"gpu_quota": 4}, now=2)
            assert await watch.check()
            assert not await watch.check()
            await store.tenancy.update("team", "u", {"gpu_quota": None}, now=3)
            assert await watch.check()
            assert [dict(q.limits) for q in applied] == [{"team:u": 4}, {}]
            assert dict(applied[0].parents) == {"team:u": "org:o"}
        finally:
            await watch.close()
            await store.close()

    asyncio.run(scenario())
