"""Role grants over a real SQLite store: granting again changes the role, a grant makes a
sign-in membership the operator's (so the next groups sync keeps it), revoking ends it,
and a missing person, scope or role is named."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from llmgw.errors import StoreMissing
from llmgw.store import Scope, Store, schema
from llmgw.store.people import Person, Role

NOW = 1_800_000_000.0


def _run(tmp_path: Path, scenario: Callable[[Store], Awaitable[None]]) -> None:
    async def main() -> None:
        store = await Store.open(str(tmp_path / "llmgw.db"))
        try:
            await store.people.create(Person(id="ada"), NOW)
            for scope in (
                Scope(kind="org", id="acme", created_at=NOW, updated_at=NOW),
                Scope(kind="team", id="research", parent="acme", created_at=NOW, updated_at=NOW),
                Scope(kind="project", id="chat", parent="research", created_at=NOW, updated_at=NOW),
            ):
                await store.tenancy.create(scope)
            await scenario(store)
        finally:
            await store.close()

    asyncio.run(main())


def test_grants_in_each_kind_and_granting_again_changes_the_role(tmp_path: Path) -> None:
    async def scenario(store: Store) -> None:
        await store.grants.grant("ada", "org", "acme", "member", NOW)
        await store.grants.grant("ada", "team", "research", "admin", NOW)
        await store.grants.grant("ada", "project", "chat", "member", NOW)
        await store.grants.grant("ada", "org", "acme", "admin", NOW)
        assert await store.people.roles("ada") == (
            Role("org", "acme", "admin"),
            Role("project", "chat", "member"),
            Role("team", "research", "admin", "manual"),
        )
        await store.grants.revoke("ada", "project", "chat")
        assert Role("project", "chat", "member") not in await store.people.roles("ada")

    _run(tmp_path, scenario)


def test_a_grant_makes_a_sign_in_membership_the_operators(tmp_path: Path) -> None:
    async def scenario(store: Store) -> None:
        # The team names the group (written as the admin API's team field does).
        async with store.engine.begin() as conn:
            await conn.execute(
                schema.teams.update().where(schema.teams.c.id == "research").values(idp_group="llm-research")
            )
        await store.people.sync_oidc_teams("ada", ["llm-research"], NOW)
        assert await store.people.roles("ada") == (Role("team", "research", "member", "oidc"),)
        await store.grants.grant("ada", "team", "research", "admin", NOW)
        # The group left at the provider: sign-in's sync leaves the operator's grant.
        await store.people.sync_oidc_teams("ada", [], NOW)
        assert await store.people.roles("ada") == (Role("team", "research", "admin", "manual"),)

    _run(tmp_path, scenario)


def test_missing_people_scopes_and_roles_are_named(tmp_path: Path) -> None:
    async def scenario(store: Store) -> None:
        with pytest.raises(StoreMissing, match="user 'bob' does not exist"):
            await store.grants.grant("bob", "team", "research", "admin", NOW)
        with pytest.raises(StoreMissing, match="team 'nope' does not exist"):
            await store.grants.grant("ada", "team", "nope", "admin", NOW)
        with pytest.raises(StoreMissing, match="holds no role in project 'chat'"):
            await store.grants.revoke("ada", "project", "chat")
        with pytest.raises(ValueError, match="admin, member"):
            await store.grants.grant("ada", "org", "acme", "owner", NOW)

    _run(tmp_path, scenario)
