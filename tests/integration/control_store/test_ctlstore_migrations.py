"""Migration 0003 adds the lease and runtime-catalog tables to a store made empty, at
0001 or at 0002, 0005 the demand and cluster-secret tables to one at 0004, and 0006 the
GPU quota column to the tenancy tables of one at 0005, on SQLite and on PostgreSQL: the
result is exactly the schema the code queries, and the tables work at once. (The data
kept across every upgrade is tests/integration/auth/test_auth_migrations.py's subject.)"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
import sqlalchemy as sa

from llmgw.control.decisions.demand import Asked
from llmgw.control.tables.demand_table import DemandTable
from llmgw.core.yamlio import dump_yaml
from llmgw.store import Scope, Store, migrate
from llmgw.store.catalog_store import CatalogStore
from llmgw.store.cluster_secret import stored_secret
from llmgw.store.engine import create_engine
from llmgw.store.lease import LeaseTable
from support.control_store import SMALL, definition, settings
from support.schema import schema_differences


def _differences(connection: sa.Connection) -> list[object]:
    return schema_differences(connection)


def _tables(connection: sa.Connection) -> set[str]:
    return set(sa.inspect(connection).get_table_names())


def test_0003_follows_0002() -> None:
    assert migrate.revisions()[:3] == ["0001", "0002", "0003"]


def test_0005_follows_0004() -> None:
    assert migrate.revisions()[3:5] == ["0004", "0005"]


def test_0006_follows_0005() -> None:
    assert migrate.revisions()[4:6] == ["0005", "0006"]


def _columns(connection: sa.Connection, table: str) -> set[str]:
    return {c["name"] for c in sa.inspect(connection).get_columns(table)}


@pytest.mark.parametrize("start", [None, "0001", "0002"])
def test_upgrading_adds_the_control_tables(blank_location: str, start: str | None) -> None:
    async def scenario() -> None:
        if start is not None:
            engine = create_engine(blank_location)
            try:
                await migrate.upgrade(engine, start)
                async with engine.connect() as conn:
                    assert not {"control_lease", "catalog_models"} & await conn.run_sync(_tables)
            finally:
                await engine.dispose()
        store = await Store.open(blank_location)
        try:
            assert await migrate.current_revision(store.engine) == migrate.head()
            async with store.engine.connect() as conn:
                assert await conn.run_sync(_differences) == []
            claimed = await LeaseTable(store.engine).claim("control", "a", timedelta(seconds=15))
            assert claimed is not None
            assert claimed.term == 1
            catalogs = CatalogStore(store, settings(SMALL))
            await catalogs.add(dump_yaml(definition(SMALL, name="extra")), "ops")
            assert (await catalogs.load()).catalog.names() == ["extra", "small"]
        finally:
            await store.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("start", [None, "0004"])
def test_upgrading_adds_the_demand_and_secret_tables(blank_location: str, start: str | None) -> None:
    async def scenario() -> None:
        if start is not None:
            engine = create_engine(blank_location)
            try:
                await migrate.upgrade(engine, start)
                async with engine.connect() as conn:
                    assert not {"control_demand", "cluster_secrets"} & await conn.run_sync(_tables)
            finally:
                await engine.dispose()
        store = await Store.open(blank_location)
        try:
            assert await migrate.current_revision(store.engine) == migrate.head()
            async with store.engine.connect() as conn:
                assert await conn.run_sync(_differences) == []
            table = DemandTable(store.engine, db_time=lambda: 100.0)
            await table.write("s1", {"chat": Asked(99.0, None)}, local_now=100.0)
            assert [(r.model, r.holder, r.asked) for r in (await table.read()).rows] == [
                ("chat", "s1", Asked(99.0, None))
            ]
            made = await stored_secret(store.engine)
            assert await stored_secret(store.engine) == made
        finally:
            await store.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("start", [None, "0005"])
def test_upgrading_adds_the_gpu_quota_column(blank_location: str, start: str | None) -> None:
    async def scenario() -> None:
        if start is not None:
            engine = create_engine(blank_location)
            try:
                await migrate.upgrade(engine, start)
                async with engine.connect() as conn:
                    for table in ("orgs", "teams", "projects"):
                        assert "gpu_quota" not in await conn.run_sync(_columns, table)
            finally:
                await engine.dispose()
        store = await Store.open(blank_location)
        try:
            assert await migrate.current_revision(store.engine) == migrate.head()
            async with store.engine.connect() as conn:
                assert await conn.run_sync(_differences) == []
                assert "gpu_quota" not in await conn.run_sync(_columns, "users")
            await store.tenancy.create(Scope("org", "o", gpu_quota=8, created_at=1, updated_at=1))
            team = Scope("team", "t", parent="o", gpu_quota=0, created_at=1, updated_at=1)
            await store.tenancy.create(team)
            assert await store.tenancy.gpu_quotas() == {"org:o": 8, "team:t": 0}
            assert await store.tenancy.parents_of("team", ["t", "missing"]) == {"t": "o"}
        finally:
            await store.close()

    asyncio.run(scenario())
