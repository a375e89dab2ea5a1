"""The store's provisioned people and groups (llmgw.store.provisioning) on SQLite and on
PostgreSQL: deactivation ends browser sessions, deprovisioning keeps the row and its
usage but ends keys and memberships, versions fence concurrent writes, and teams follow
the groups they name without touching memberships an operator made."""

from __future__ import annotations

import asyncio

import pytest
import sqlalchemy as sa
from auth_store_helpers import opened

from llmgw.errors import StoreConflict, StoreMissing, StoreStale
from llmgw.store import KeyRow, Scope, Store, schema
from llmgw.store.provisioning import IdpGroup, ProvisionedPerson

NOW = 1_700_000_000.0


async def _sessions(store: Store, user_id: str) -> int:
    async with store.engine.begin() as conn:
        query = sa.select(sa.func.count()).select_from(schema.browser_sessions)
        return int(
            (await conn.execute(query.where(schema.browser_sessions.c.user_id == user_id))).scalar_one()
        )


async def _add_session(store: Store, user_id: str, name: str) -> None:
    async with store.engine.begin() as conn:
        await conn.execute(
            schema.browser_sessions.insert().values(
                id_hash=name,
                user_id=user_id,
                csrf_token="c",
                created_at=NOW,
                last_seen_at=NOW,
                expires_at=NOW + 3600,
            )
        )


async def _team(store: Store, team: str, group: str | None) -> None:
    await store.tenancy.create(Scope(kind="org", id=f"{team}-org", created_at=NOW, updated_at=NOW))
    await store.tenancy.create(
        Scope(kind="team", id=team, parent=f"{team}-org", idp_group=group, created_at=NOW, updated_at=NOW)
    )


def test_deactivation_ends_sessions_and_deprovisioning_keeps_the_row(store_location: str) -> None:
    async def run() -> None:
        async with opened(store_location) as store:
            people = store.provisioning
            ada = await people.create_person(
                ProvisionedPerson(id="ada", user_name="ada", email="a@x.org"), NOW
            )
            assert (ada.version, ada.active) == (1, True)
            await _add_session(store, "ada", "s1")
            await _add_session(store, "ada", "s2")
            await store.keys.create(KeyRow(id="k1", hash="h1", user_id="ada", created_at=NOW, updated_at=NOW))
            off = await people.save_person(
                ProvisionedPerson(id="ada", user_name="ada", active=False), 1, NOW + 1
            )
            assert (off.version, off.active, off.updated_at) == (2, False, NOW + 1)
            assert await _sessions(store, "ada") == 0
            assert (await store.tenancy.get("user", "ada")).disabled
            with pytest.raises(StoreStale):
                await people.save_person(ProvisionedPerson(id="ada", user_name="ada"), 1, NOW + 2)

            await people.deprovision_person("ada", None, NOW + 3)
            with pytest.raises(StoreMissing):
                await people.person("ada")
            row = await store.tenancy.get("user", "ada")  # still there: usage refers to it
            assert row.disabled
            assert (await store.keys.get("k1")).revoked_at == NOW + 3
            assert await people.find_people("userName", "ada", 0, 10) == (0, [])
            # Provisioned again under the same name: the same person comes back.
            back = await people.create_person(ProvisionedPerson(id="ada", user_name="ada"), NOW + 4)
            assert (back.id, back.active, back.version) == ("ada", True, 4)

    asyncio.run(run())


def test_a_taken_id_gets_a_new_one_and_user_names_are_found_without_case(store_location: str) -> None:
    async def run() -> None:
        async with opened(store_location) as store:
            people = store.provisioning
            await people.create_person(ProvisionedPerson(id="ada", user_name="ada"), NOW)
            # ada renamed at the provider; a new "ada" arrives and gets an id of its own.
            await people.save_person(ProvisionedPerson(id="ada", user_name="ada.king"), None, NOW)
            second = await people.create_person(ProvisionedPerson(id="ada", user_name="ada"), NOW)
            assert second.id.startswith("u-")
            total, found = await people.find_people("userName", "ADA.KING", 0, 10)
            assert (total, [p.id for p in found]) == (1, ["ada"])
            with pytest.raises(StoreConflict):
                await people.create_person(ProvisionedPerson(id="", user_name="ada"), NOW)

    asyncio.run(run())


def test_teams_follow_the_group_they_name(store_location: str) -> None:
    async def run() -> None:
        async with opened(store_location) as store:
            people = store.provisioning
            for name in ("a", "b", "c"):
                await people.create_person(ProvisionedPerson(id=name, user_name=name), NOW)
            await _team(store, "research", "Research")
            async with store.engine.begin() as conn:
                await conn.execute(
                    schema.team_memberships.insert().values(
                        user_id="c", team_id="research", role="admin", source="manual", created_at=NOW
                    )
                )
            group = await people.create_group(
                IdpGroup(id="g", display_name="Research", members=("a", "c")), NOW
            )

            async def members(team: str) -> dict[str, str]:
                return {m.user_id: m.source for m in await people.team_members(team)}

            assert await members("research") == {"a": "scim", "c": "manual"}
            await people.save_group(
                IdpGroup(id="g", display_name="Research", members=("b",)), group.version, NOW
            )
            assert await members("research") == {"b": "scim", "c": "manual"}
            with pytest.raises(StoreStale):
                await people.save_group(IdpGroup(id="g", display_name="Research"), group.version, NOW)
            # A team set to name a group later picks its members up (one team a group).
            await people.create_group(IdpGroup(id="o", display_name="Ops", members=("b", "a")), NOW)
            await _team(store, "later", None)
            await store.tenancy.update("team", "later", {"idp_group": "Ops"}, NOW)
            await people.sync_team("later", NOW)
            assert await members("later") == {"a": "scim", "b": "scim"}
            with pytest.raises(StoreConflict):
                await store.tenancy.update("team", "later", {"idp_group": "Research"}, NOW)
            await people.deprovision_person("b", None, NOW)
            assert await members("later") == {"a": "scim"}
            assert await members("research") == {"c": "manual"}
            await people.save_group(IdpGroup(id="g", display_name="Research", members=("a",)), None, NOW)
            assert await members("research") == {"a": "scim", "c": "manual"}
            await people.delete_group("g", None, NOW)
            assert await members("research") == {"c": "manual"}
            await store.tenancy.update("team", "later", {"idp_group": None}, NOW)
            await people.sync_team("later", NOW)
            assert await members("later") == {}

    asyncio.run(run())
