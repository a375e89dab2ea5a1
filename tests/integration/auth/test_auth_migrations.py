"""Schema migrations: a store made at every earlier version, with data in it, upgrades
in place to the newest with its data intact, on SQLite and on PostgreSQL; and the
newest migration builds exactly the tables the code queries."""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Awaitable, Callable

import pytest
import sqlalchemy as sa
from alembic.operations import Operations
from alembic.runtime.migration import MigrationContext
from sqlalchemy.ext.asyncio import AsyncConnection

from llmgw.store import Scope, Store, migrate
from llmgw.store.engine import create_engine
from llmgw.store.lease import LeaseTable
from support.schema import schema_differences

T = 1_800_000_123.0  # a time inside a five-minute bucket that starts at 1_800_000_000


async def seed_0001(conn: AsyncConnection) -> None:
    """Rows as a 0001 store held them: a tree, a key, usage records, spend."""
    scope = "rpm, tpm, budget_micros, budget_period, allowed_models, band, created_at, updated_at"
    await conn.execute(
        sa.text(f"INSERT INTO orgs (id, {scope}) VALUES ('o', 10, NULL, 5000, 'day', NULL, NULL, 1, 1)")
    )
    await conn.execute(
        sa.text(
            f"INSERT INTO teams (id, org_id, {scope}) "
            "VALUES ('t', 'o', NULL, NULL, NULL, NULL, NULL, NULL, 1, 1)"
        )
    )
    await conn.execute(
        sa.text(
            f"INSERT INTO projects (id, team_id, {scope}) "
            """VALUES ('p', 't', NULL, 99, NULL, NULL, '["m1"]', 'silver', 1, 1)"""
        )
    )
    await conn.execute(
        sa.text(
            "INSERT INTO api_keys (id, hash, name, project_id, created_at, updated_at) "
            "VALUES ('abcd1234', 'h', 'ci', 'p', 1, 1)"
        )
    )
    for i, status in enumerate((200, 200, 500)):
        await conn.execute(
            sa.text(
                "INSERT INTO usage_records (ts, request_id, key_id, project_id, team_id, org_id, model, "
                "replica, status, stream, prompt_tokens, completion_tokens, cost_micros, queue_s, "
                "duration_s) "
                "VALUES (:ts, :rid, 'abcd1234', 'p', 't', 'o', 'm1', 'r1', :status, false, 10, 5, 7, 0, 1)"
            ),
            {"ts": T + i, "rid": f"req-{i}", "status": status},
        )
    await conn.execute(
        sa.text(
            "INSERT INTO spend (scope, period, period_start, cost_micros) VALUES ('project:p', 'day', 0, 21)"
        )
    )


async def seed_0002(conn: AsyncConnection) -> None:
    """The 0001 rows, with the five-minute sums a 0002 store keeps beside its records."""
    await seed_0001(conn)
    await conn.execute(
        sa.text(
            "INSERT INTO usage_sums (bucket, org_id, team_id, project_id, user_id, key_id, model, "
            "requests, errors, prompt_tokens, completion_tokens, cost_micros) "
            "VALUES (1800000000, 'o', 't', 'p', '', 'abcd1234', 'm1', 3, 1, 30, 15, 21)"
        )
    )


async def seed_0003(conn: AsyncConnection) -> None:
    """The 0002 rows, with the leader lease and a runtime catalog entry a 0003 store keeps."""
    await seed_0002(conn)
    await conn.execute(
        sa.text(
            "INSERT INTO control_lease (name, holder, term, acquired_at, expires_at) "
            "VALUES ('control', 'gpu-01:42:abcdef', 7, 1800000000, 1800000015)"
        )
    )
    await conn.execute(
        sa.text(
            "INSERT INTO catalog_models (name, definition, updated_at, updated_by) "
            "VALUES ('gone', NULL, 1800000001, 'ops')"
        )
    )


async def seed_0004(conn: AsyncConnection) -> None:
    """The 0003 rows, with a replica the leader published into a 0004 store's table."""
    await seed_0003(conn)
    await conn.execute(
        sa.text(
            "INSERT INTO control_replicas (replica_id, model, url, engine, weight, pool, labels, term, "
            "updated_at) VALUES ('chat-1', 'chat', 'http://10.0.0.5:20000', 'vllm', 1, 'chat', '{}', 7, "
            "1800000002)"
        )
    )


async def seed_0005(conn: AsyncConnection) -> None:
    """The 0004 rows, with a server's demand row and the engine secret a 0005 store keeps."""
    await seed_0004(conn)
    await conn.execute(
        sa.text(
            "INSERT INTO control_demand (model, holder, last_asked, waiting_since, updated_at) "
            "VALUES ('chat', 'gpu-01:42:abcdef', 1800000003, NULL, 1800000003)"
        )
    )
    await conn.execute(
        sa.text(
            "INSERT INTO cluster_secrets (name, secret, created_at) VALUES ('engine', 's3cret', 1800000000)"
        )
    )


async def seed_0006(conn: AsyncConnection) -> None:
    """The 0005 rows, with the GPU quota a 0006 store may hold on a team."""
    await seed_0005(conn)
    await conn.execute(sa.text("UPDATE teams SET gpu_quota = 2 WHERE id = 't'"))


async def seed_0007(conn: AsyncConnection) -> None:
    """The 0006 rows, with a record of a person's key with tags and a time to first
    token (0007 dropped an index only); 0008 moves records into batches."""
    await seed_0006(conn)
    await conn.execute(
        sa.text(
            "INSERT INTO usage_records (ts, request_id, key_id, user_id, model, replica, status, stream, "
            "prompt_tokens, completion_tokens, cost_micros, queue_s, ttft_s, duration_s, tags) "
            "VALUES (:ts, 'req-personal', 'efgh5678', 'u', 'm2', 'r2', 200, true, 1, 2, 0, 0.5, 0.25, 2, "
            """'{"run": "nightly"}')"""
        ),
        {"ts": T - 400},
    )


def _run_0008(connection: sa.Connection, step: str) -> None:
    """0008's own upgrade or downgrade, on this connection."""
    migration = importlib.import_module("llmgw.store.migrations.versions.0008_usage_batches")
    with Operations.context(MigrationContext.configure(connection)):
        getattr(migration, step)()


async def seed_0008(conn: AsyncConnection) -> None:
    """The 0007 rows as a 0008 store holds them, in batches: written at 0007 and moved by
    0008's own upgrade (0009 adds guard attachments, which start empty)."""
    await conn.run_sync(_run_0008, "downgrade")
    await seed_0007(conn)
    await conn.run_sync(_run_0008, "upgrade")


async def seed_0009(conn: AsyncConnection) -> None:
    """The 0008 rows with a guard policy attached to the team (0010 adds identity columns
    and tables, which start empty; existing people stay active)."""
    await seed_0008(conn)
    await conn.execute(
        sa.text(
            "INSERT INTO guard_attachments (scope_kind, scope_id, policy, created_at) "
            "VALUES ('team', 't', 'pii', 1800000000)"
        )
    )


async def seed_0010(conn: AsyncConnection) -> None:
    """The 0009 rows and a person provisioned by SCIM (0011 adds their user name at the
    provider, which starts empty and reads as their id)."""
    await seed_0009(conn)
    await conn.execute(
        sa.text(
            "INSERT INTO users (id, email, disabled, created_at, updated_at, name, external_id, "
            "status, version) VALUES "
            "('ada', 'ada@x.org', FALSE, 1800000000, 1800000000, 'Ada', 'e-ada', 'active', 3)"
        )
    )


async def seed_0011(conn: AsyncConnection) -> None:
    """The 0010 rows as 0011 holds them (0012 adds webhook deliveries, which start empty)."""
    await seed_0010(conn)


async def seed_0012(conn: AsyncConnection) -> None:
    """The 0011 rows as 0012 holds them (0013 adds node certificates, which start empty)."""
    await seed_0011(conn)


async def seed_0013(conn: AsyncConnection) -> None:
    """The 0012 rows as 0013 holds them (0014 adds stored responses and conversations,
    which start empty)."""
    await seed_0012(conn)


async def seed_0014(conn: AsyncConnection) -> None:
    """The 0013 rows as 0014 holds them (0015 adds files and batches, which start empty)."""
    await seed_0013(conn)


async def seed_0015(conn: AsyncConnection) -> None:
    """The 0014 rows as 0015 holds them (0016 adds a project's response cache lifetime,
    which starts off for every project)."""
    await seed_0014(conn)


async def seed_0016(conn: AsyncConnection) -> None:
    """The 0015 rows as 0016 holds them (0017 adds the audit log, which starts empty)."""
    await seed_0015(conn)


SEEDS: dict[str, Callable[[AsyncConnection], Awaitable[None]]] = {
    "0001": seed_0001,
    "0002": seed_0002,
    "0003": seed_0003,
    "0004": seed_0004,
    "0005": seed_0005,
    "0006": seed_0006,
    "0007": seed_0007,
    "0008": seed_0008,
    "0009": seed_0009,
    "0010": seed_0010,
    "0011": seed_0011,
    "0012": seed_0012,
    "0013": seed_0013,
    "0014": seed_0014,
    "0015": seed_0015,
    "0016": seed_0016,
}


def test_every_earlier_version_has_seed_data() -> None:
    assert migrate.revisions()[:-1] == list(SEEDS), "write a seed for each schema version before the newest"


def _schema_differences(connection: sa.Connection) -> list[object]:
    return schema_differences(connection)


@pytest.mark.parametrize("version", list(SEEDS))
def test_upgrade_from_an_earlier_version_keeps_the_data(blank_store_location: str, version: str) -> None:
    store_location = blank_store_location

    async def scenario() -> None:
        engine = create_engine(store_location)
        try:
            await migrate.upgrade(engine, version)
            assert await migrate.current_revision(engine) == version
            async with engine.begin() as conn:
                await SEEDS[version](conn)
        finally:
            await engine.dispose()
        store = await Store.open(store_location)  # upgrades in place
        try:
            assert await migrate.current_revision(store.engine) == migrate.head()
            async with store.engine.connect() as conn:
                assert await conn.run_sync(_schema_differences) == []
            org = await store.tenancy.get("org", "o")
            assert (org.rpm, org.budget_micros, org.budget_period, org.max_key_ttl_s) == (
                10,
                5000,
                "day",
                None,
            )
            project = await store.tenancy.get("project", "p")
            assert (project.parent, project.tpm, project.allowed_models, project.band) == (
                "t",
                99,
                ("m1",),
                "silver",
            )
            key = await store.keys.get("abcd1234")
            assert (key.hash, key.project_id, key.revoked_at) == ("h", "p", None)
            assert await store.usage.count_records() == (4 if version >= "0007" else 3)
            records = await store.usage.records(limit=10, since=T - 600)
            assert [(r["request_id"], r["status"], r["ts"]) for r in records][:3] == [
                ("req-2", 500, T + 2),
                ("req-1", 200, T + 1),
                ("req-0", 200, T),
            ]
            assert records[0]["project_id"] == "p"
            assert not records[0]["stream"]
            assert records[0]["tags"] == {}
            if version >= "0007":
                personal = records[-1]
                assert (personal["request_id"], personal["user_id"], personal["project_id"]) == (
                    "req-personal",
                    "u",
                    None,
                )
                assert (personal["stream"], personal["ttft_s"], personal["tags"]) == (
                    True,
                    0.25,
                    {"run": "nightly"},
                )
            # The five-minute sums were filled from the records already there.
            [total] = await store.usage.totals("project", since=T - 600)
            assert (total.group, total.requests, total.errors, total.prompt_tokens, total.cost_micros) == (
                "p",
                3,
                1,
                30,
                21,
            )
            assert await store.usage.spend_totals({"day": 0}) == {("project:p", "day", 0): 21}
            if version >= "0003":
                lease = await LeaseTable(store.engine, db_time=lambda: T).read("control")
                assert lease.record is not None
                assert (lease.record.holder, lease.record.term) == ("gpu-01:42:abcdef", 7)
                async with store.engine.connect() as conn:
                    tombstones = (await conn.execute(sa.text("SELECT name FROM catalog_models"))).all()
                    assert [row.name for row in tombstones] == ["gone"]
                    replicas = (
                        await conn.execute(sa.text("SELECT replica_id, term FROM control_replicas"))
                    ).all()
                    assert [tuple(r) for r in replicas] == ([("chat-1", 7)] if version >= "0004" else [])
            async with store.engine.connect() as conn:
                for table in ("control_demand", "cluster_secrets"):  # added by 0005
                    count = (await conn.execute(sa.text(f"SELECT count(*) FROM {table}"))).scalar()
                    assert count == (1 if version >= "0005" else 0)
            # 0006's GPU quotas: none on the rows already there, and settable at once.
            assert (org.gpu_quota, project.gpu_quota) == (None, None)
            assert project.cache_ttl_s is None
            assert await store.tenancy.gpu_quotas() == ({"team:t": 2} if version >= "0006" else {})
            await store.tenancy.update("team", "t", {"gpu_quota": 4}, now=T)
            assert await store.tenancy.gpu_quotas() == {"team:t": 4}
            assert await store.tenancy.parents_of("project", ["p"]) == {"p": "t"}
            if version >= "0010":
                person = await store.provisioning.person("ada")
                assert (person.user_name, person.external_id, person.version) == ("ada", "e-ada", 3)
            assert await store.notify.log(None, 10) == []  # 0012's deliveries start empty
            assert await store.responses.get_response("resp_x", "threads") is None  # 0013's start empty
        finally:
            await store.close()

    asyncio.run(scenario())


def test_opening_twice_changes_nothing(blank_store_location: str) -> None:
    async def scenario() -> None:
        for _ in range(2):
            store = await Store.open(blank_store_location)
            try:
                if not await store.tenancy.find("org"):
                    await store.tenancy.create(Scope("org", "kept", created_at=1, updated_at=1))
                assert [s.id for s in await store.tenancy.find("org")] == ["kept"]
                assert await migrate.current_revision(store.engine) == migrate.head()
            finally:
                await store.close()

    asyncio.run(scenario())
