"""People and groups as an identity provider provisions them (SCIM), and the team
memberships that follow from the groups.

A person is a `users` row: its id is the llmgw name keys, memberships and usage refer
to, and never changes; `user_name` is the provider's name for them, which may. A group
is an `idp_groups` row with its members in `idp_group_members`; every team whose
`idp_group` equals a group's display name holds that group's members as
`team_memberships` of source `scim`, rewritten in the same transaction as any change to
the group, the team's `idp_group` or the person.

Nothing here deletes a `users` row: usage, keys and memberships refer to it. A person
the provider deletes is *deprovisioned*: disabled, out of every group and of the teams
the groups gave, their browser sessions and personal keys ended, their external id
freed, and hidden from every query here, while the row (and so their usage) stays.

Rows carry a `version`, raised by one on every write, which SCIM shows as the ETag; a
write that names the version it read fails with `StoreStale` if another came first.
"""

from __future__ import annotations

import functools
import sqlite3
import uuid
from collections.abc import Collection, Iterable
from dataclasses import dataclass, replace
from typing import Literal

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from llmgw.errors import StoreConflict, StoreError, StoreMissing, StoreStale
from llmgw.store import schema
from llmgw.store.engine import SqliteWorker, transaction
from llmgw.store.group_commit import GroupCommit

DEPROVISIONED = "deprovisioned"
"""`users.status` of a person the identity provider deleted."""
SCIM_SOURCE = "scim"
"""`team_memberships.source` of a membership a provisioned group gave."""

PersonAttribute = Literal["id", "userName", "externalId"]
GroupAttribute = Literal["id", "displayName", "externalId"]


@dataclass(frozen=True, slots=True)
class ProvisionedPerson:
    """A person as provisioning sees them: `id` is llmgw's, fixed; `user_name` the
    provider's, which may change (NULL in the row reads as the id)."""

    id: str
    user_name: str
    email: str | None = None
    name: str | None = None
    external_id: str | None = None
    active: bool = True
    version: int = 1
    created_at: float = 0.0
    updated_at: float = 0.0


@dataclass(frozen=True, slots=True)
class IdpGroup:
    """A group of the identity provider, with its members' person ids."""

    id: str
    display_name: str
    external_id: str | None = None
    members: tuple[str, ...] = ()
    version: int = 1
    created_at: float = 0.0
    updated_at: float = 0.0


@dataclass(frozen=True, slots=True)
class TeamMember:
    user_id: str
    team_id: str
    role: str
    source: str
    created_at: float


_users = schema.users
_groups = schema.idp_groups
_members = schema.idp_group_members
_teams = schema.teams
_team_members = schema.team_memberships
_present = _users.c.status != DEPROVISIONED


def _person(row: sa.RowMapping) -> ProvisionedPerson:
    return ProvisionedPerson(
        id=row["id"],
        user_name=row["user_name"] or row["id"],
        email=row["email"],
        name=row["name"],
        external_id=row["external_id"],
        active=not row["disabled"],
        version=row["version"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def _person_values(person: ProvisionedPerson, now: float) -> dict[str, object]:
    return {
        "user_name": person.user_name,
        "email": person.email,
        "name": person.name,
        "external_id": person.external_id,
        "disabled": not person.active,
        "updated_at": now,
    }


class ProvisioningRepo:
    """Provisioned people and groups, and the team memberships groups give."""

    def __init__(self, engine: AsyncEngine, sqlite: SqliteWorker | None = None) -> None:
        self._engine = engine
        self._sqlite = sqlite
        self._creates: GroupCommit[tuple[ProvisionedPerson, float], ProvisionedPerson] = GroupCommit(
            self._create_batch
        )

    # --- people --------------------------------------------------------------------

    async def create_person(self, person: ProvisionedPerson, now: float) -> ProvisionedPerson:
        """Inserts a person under `person.id`, or under a new id when that is empty or
        held by another present person; one deprovisioned under that id comes back
        instead (the same name, provisioned again). `StoreConflict` when the user name
        (in any case) or the external id is held by a present person. Creates that
        arrive together share a transaction (llmgw.store.group_commit)."""
        return await self._creates.submit((person, now))

    async def _create_batch(
        self, jobs: list[tuple[ProvisionedPerson, float]]
    ) -> list[ProvisionedPerson | StoreError]:
        # On a SQLite file the whole batch is one call on the store's writer thread: one
        # hop there and back rather than one a statement, which under load cost more
        # than the statements.
        if self._sqlite is not None:
            return await self._sqlite.transaction(functools.partial(_create_all_sqlite, jobs))
        outcomes: list[ProvisionedPerson | StoreError] = []
        async with transaction(self._engine) as conn:
            for job in jobs:
                try:
                    outcomes.append(await _create(conn, job))
                except StoreConflict as exc:
                    outcomes.append(exc)
        return outcomes

    async def person(self, user_id: str) -> ProvisionedPerson:
        async with transaction(self._engine) as conn:
            return await self._person(conn, user_id)

    async def _person(self, conn: AsyncConnection, user_id: str) -> ProvisionedPerson:
        row = (await conn.execute(_users.select().where(_users.c.id == user_id, _present))).mappings().first()
        if row is None:
            raise StoreMissing(f"person {user_id!r} does not exist")
        return _person(row)

    async def find_people(
        self, attribute: PersonAttribute | None, value: str | None, offset: int, limit: int
    ) -> tuple[int, list[ProvisionedPerson]]:
        """People matching `attribute eq value` (all without one), ordered by id: how
        many in all, and those from `offset` up to `limit` of them."""
        where: list[sa.ColumnElement[bool]] = [_present]
        if attribute is not None and value is not None:
            # userName is case-insensitive in SCIM; externalId and id are exact.
            if attribute == "userName":
                name = sa.func.coalesce(_users.c.user_name, _users.c.id)
                where.append(sa.func.lower(name) == value.lower())
            else:
                where.append((_users.c.id if attribute == "id" else _users.c.external_id) == value)
        # The total rides along with the page (a window count), so the usual asking, a
        # look-up before a create, is one statement; only a page past the end counts apart.
        total_column = sa.func.count().over().label("total_matching")
        query = (
            sa.select(_users, total_column).where(*where).order_by(_users.c.id).offset(offset).limit(limit)
        )
        async with transaction(self._engine) as conn:
            rows = (await conn.execute(query)).mappings().all() if limit > 0 else []
            if rows:
                total = rows[0]["total_matching"]
            elif offset > 0 or limit == 0:
                count = sa.select(sa.func.count()).select_from(_users).where(*where)
                total = (await conn.execute(count)).scalar_one()
            else:
                total = 0
        return int(total), [_person(row) for row in rows]

    async def save_person(
        self, person: ProvisionedPerson, expected_version: int | None, now: float
    ) -> ProvisionedPerson:
        """Writes a present person's details; made inactive, their browser sessions end
        in the same transaction. `StoreStale` when `expected_version` is given and is no
        longer theirs."""
        async with transaction(self._engine) as conn:
            await self._bump_person(conn, person.id, expected_version, _person_values(person, now))
            if not person.active:
                await conn.execute(
                    schema.browser_sessions.delete().where(schema.browser_sessions.c.user_id == person.id)
                )
            return await self._person(conn, person.id)

    async def _bump_person(
        self, conn: AsyncConnection, user_id: str, expected_version: int | None, values: dict[str, object]
    ) -> None:
        where = [_users.c.id == user_id, _present]
        if expected_version is not None:
            where.append(_users.c.version == expected_version)
        result = await conn.execute(
            _users.update().where(*where).values(version=_users.c.version + 1, **values)
        )
        if result.rowcount == 0:
            await self._person(conn, user_id)  # StoreMissing when it is not there at all
            raise StoreStale(f"person {user_id!r} changed since version {expected_version}")

    async def deprovision_person(self, user_id: str, expected_version: int | None, now: float) -> None:
        """The provider deleted this person: see the module's docstring for what stays."""
        async with transaction(self._engine) as conn:
            await self._bump_person(
                conn,
                user_id,
                expected_version,
                {"status": DEPROVISIONED, "disabled": True, "external_id": None, "updated_at": now},
            )
            await conn.execute(_members.delete().where(_members.c.user_id == user_id))
            await conn.execute(
                _team_members.delete().where(
                    _team_members.c.user_id == user_id, _team_members.c.source == SCIM_SOURCE
                )
            )
            await conn.execute(
                schema.browser_sessions.delete().where(schema.browser_sessions.c.user_id == user_id)
            )
            keys = schema.api_keys
            await conn.execute(
                keys.update()
                .where(keys.c.user_id == user_id, keys.c.project_id.is_(None), keys.c.revoked_at.is_(None))
                .values(revoked_at=now, updated_at=now)
            )

    async def unknown_people(self, ids: Collection[str]) -> list[str]:
        """Those of `ids` that name no present person, sorted."""
        wanted = set(ids)
        if not wanted:
            return []
        async with transaction(self._engine) as conn:
            found = (
                (await conn.execute(sa.select(_users.c.id).where(_users.c.id.in_(sorted(wanted)), _present)))
                .scalars()
                .all()
            )
        return sorted(wanted - set(found))

    # --- groups --------------------------------------------------------------------

    async def create_group(self, group: IdpGroup, now: float) -> IdpGroup:
        """Inserts a group with its members; `StoreConflict` when its id, display name
        or external id is taken, or a member is no person."""
        async with transaction(self._engine) as conn:
            await conn.execute(
                _groups.insert().values(
                    id=group.id,
                    display_name=group.display_name,
                    external_id=group.external_id,
                    version=1,
                    created_at=now,
                    updated_at=now,
                )
            )
            await self._set_members(conn, group.id, group.members)
            await _sync_teams(conn, {group.display_name}, now)
            return await self._group(conn, group.id)

    async def group(self, group_id: str, *, with_members: bool = True) -> IdpGroup:
        async with transaction(self._engine) as conn:
            return await self._group(conn, group_id, with_members=with_members)

    async def _group(self, conn: AsyncConnection, group_id: str, *, with_members: bool = True) -> IdpGroup:
        row = (await conn.execute(_groups.select().where(_groups.c.id == group_id))).mappings().first()
        if row is None:
            raise StoreMissing(f"group {group_id!r} does not exist")
        members = await _members_of(conn, [group_id]) if with_members else {}
        return _group(row, members.get(group_id, ()))

    async def find_groups(
        self,
        attribute: GroupAttribute | None,
        value: str | None,
        offset: int,
        limit: int,
        *,
        with_members: bool = True,
    ) -> tuple[int, list[IdpGroup]]:
        """Groups matching `attribute eq value` (all without one), ordered by display
        name: how many in all, and those from `offset` up to `limit` of them."""
        where: list[sa.ColumnElement[bool]] = []
        if attribute is not None and value is not None:
            if attribute == "displayName":
                where.append(sa.func.lower(_groups.c.display_name) == value.lower())
            else:
                where.append((_groups.c.id if attribute == "id" else _groups.c.external_id) == value)
        async with transaction(self._engine) as conn:
            total = (
                await conn.execute(sa.select(sa.func.count()).select_from(_groups).where(*where))
            ).scalar_one()
            query = (
                _groups.select().where(*where).order_by(_groups.c.display_name).offset(offset).limit(limit)
            )
            rows = (await conn.execute(query)).mappings().all()
            members = await _members_of(conn, [row["id"] for row in rows]) if with_members else {}
        return int(total), [_group(row, members.get(row["id"], ())) for row in rows]

    async def save_group(self, group: IdpGroup, expected_version: int | None, now: float) -> IdpGroup:
        """Writes a group's name, external id and members, and the memberships of the
        teams naming it (under its old name or its new one)."""
        async with transaction(self._engine) as conn:
            old = await self._group(conn, group.id, with_members=False)
            where = [_groups.c.id == group.id]
            if expected_version is not None:
                where.append(_groups.c.version == expected_version)
            result = await conn.execute(
                _groups.update()
                .where(*where)
                .values(
                    display_name=group.display_name,
                    external_id=group.external_id,
                    version=_groups.c.version + 1,
                    updated_at=now,
                )
            )
            if result.rowcount == 0:
                raise StoreStale(f"group {group.id!r} changed since version {expected_version}")
            await conn.execute(_members.delete().where(_members.c.group_id == group.id))
            await self._set_members(conn, group.id, group.members)
            await _sync_teams(conn, {old.display_name, group.display_name}, now)
            return await self._group(conn, group.id)

    async def delete_group(self, group_id: str, expected_version: int | None, now: float) -> None:
        """Deletes a group; the teams naming it lose the memberships it gave."""
        async with transaction(self._engine) as conn:
            old = await self._group(conn, group_id, with_members=False)
            if expected_version is not None and old.version != expected_version:
                raise StoreStale(f"group {group_id!r} changed since version {expected_version}")
            await conn.execute(_members.delete().where(_members.c.group_id == group_id))
            await conn.execute(_groups.delete().where(_groups.c.id == group_id))
            await _sync_teams(conn, {old.display_name}, now)

    async def _set_members(self, conn: AsyncConnection, group_id: str, members: Iterable[str]) -> None:
        rows = [{"group_id": group_id, "user_id": user_id} for user_id in sorted(set(members))]
        if rows:
            await conn.execute(_members.insert(), rows)

    # --- teams ---------------------------------------------------------------------

    async def sync_team(self, team_id: str, now: float) -> None:
        """Brings a team's `scim` memberships in line with the group it names (none: it
        keeps no such membership), after its `idp_group` was set or cleared."""
        async with transaction(self._engine) as conn:
            await _sync_team(conn, team_id, now)

    async def team_members(self, team_id: str) -> list[TeamMember]:
        query = (
            _team_members.select().where(_team_members.c.team_id == team_id).order_by(_team_members.c.user_id)
        )
        async with transaction(self._engine) as conn:
            rows = (await conn.execute(query)).mappings().all()
        return [TeamMember(r["user_id"], r["team_id"], r["role"], r["source"], r["created_at"]) for r in rows]


def _group(row: sa.RowMapping, members: Iterable[str]) -> IdpGroup:
    return IdpGroup(
        id=row["id"],
        display_name=row["display_name"],
        external_id=row["external_id"],
        members=tuple(members),
        version=row["version"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


async def _members_of(conn: AsyncConnection, group_ids: list[str]) -> dict[str, list[str]]:
    if not group_ids:
        return {}
    query = (
        sa.select(_members.c.group_id, _members.c.user_id)
        .where(_members.c.group_id.in_(group_ids))
        .order_by(_members.c.group_id, _members.c.user_id)
    )
    out: dict[str, list[str]] = {}
    for group_id, user_id in (await conn.execute(query)).all():
        out.setdefault(group_id, []).append(user_id)
    return out


async def _sync_teams(conn: AsyncConnection, group_names: Collection[str], now: float) -> None:
    """Re-syncs every team that names one of `group_names`."""
    names = sorted(set(group_names))
    teams = (await conn.execute(sa.select(_teams.c.id).where(_teams.c.idp_group.in_(names)))).scalars().all()
    for team_id in teams:
        await _sync_team(conn, team_id, now)


async def _sync_team(conn: AsyncConnection, team_id: str, now: float) -> None:
    group_name = (await conn.execute(sa.select(_teams.c.idp_group).where(_teams.c.id == team_id))).scalar()
    wanted: set[str] = set()
    if group_name is not None:
        query = (
            sa.select(_members.c.user_id)
            .join(_groups, _groups.c.id == _members.c.group_id)
            .where(_groups.c.display_name == group_name)
        )
        wanted = set((await conn.execute(query)).scalars().all())
    rows = (
        await conn.execute(
            sa.select(_team_members.c.user_id, _team_members.c.source).where(
                _team_members.c.team_id == team_id
            )
        )
    ).all()
    held: dict[str, str] = {str(user_id): str(source) for user_id, source in rows}
    # Only the memberships a group gave go with it: one an operator or a sign-in made
    # stays, and is not doubled.
    gone = sorted(
        user_id for user_id, source in held.items() if source == SCIM_SOURCE and user_id not in wanted
    )
    if gone:
        await conn.execute(
            _team_members.delete().where(
                _team_members.c.team_id == team_id, _team_members.c.user_id.in_(gone)
            )
        )
    new = sorted(wanted - set(held))
    if new:
        await conn.execute(
            _team_members.insert(),
            [
                {
                    "user_id": user_id,
                    "team_id": team_id,
                    "role": "member",
                    "source": SCIM_SOURCE,
                    "created_at": now,
                }
                for user_id in new
            ],
        )


def _new_id(person: ProvisionedPerson, holder_status: str | None) -> str:
    """`person.id` when free or a deprovisioned person's, else a new one."""
    if person.id and (holder_status is None or holder_status == DEPROVISIONED):
        return person.id
    return f"u-{uuid.uuid4().hex[:16]}"


async def _create(conn: AsyncConnection, job: tuple[ProvisionedPerson, float]) -> ProvisionedPerson:
    person, now = job
    # One read answers both questions (is the name taken; is the id free or a
    # deprovisioned person's), and the row written is known without reading it back.
    taken = sa.func.lower(sa.func.coalesce(_users.c.user_name, _users.c.id)) == person.user_name.lower()
    if person.external_id is not None:
        taken = sa.or_(taken, _users.c.external_id == person.external_id)
    query = sa.select(
        _users.c.id,
        _users.c.status,
        _users.c.version,
        _users.c.created_at,
        sa.and_(taken, _present).label("taken"),
    )
    rows = (await conn.execute(query.where(sa.or_(taken, _users.c.id == person.id)))).all()
    if any(row.taken for row in rows):
        raise StoreConflict(f"user name {person.user_name!r} or external id {person.external_id!r} is taken")
    old = next((row for row in rows if row.id == person.id), None)
    ident = _new_id(person, old.status if old is not None else None)
    values = _person_values(person, now)
    if ident != person.id or old is None:
        await conn.execute(
            _users.insert().values(id=ident, created_at=now, status="active", version=1, **values)
        )
        return replace(person, id=ident, version=1, created_at=now, updated_at=now)
    version = old.version + 1
    await conn.execute(
        _users.update().where(_users.c.id == ident).values(status="active", version=version, **values)
    )
    return replace(person, id=ident, version=version, created_at=old.created_at, updated_at=now)


_FIND_SQLITE = (
    "SELECT id, status, version, created_at, "
    "(lower(coalesce(user_name, id)) = ? OR external_id = ?) AND status != ? "
    "FROM users WHERE lower(coalesce(user_name, id)) = ? OR external_id = ? OR id = ?"
)
_INSERT_SQLITE = (
    "INSERT INTO users (id, user_name, email, name, external_id, disabled, status, version, "
    "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, 'active', 1, ?, ?)"
)
_REVIVE_SQLITE = (
    "UPDATE users SET user_name = ?, email = ?, name = ?, external_id = ?, disabled = ?, status = 'active', "
    "version = ?, updated_at = ? WHERE id = ?"
)


def _create_all_sqlite(
    jobs: list[tuple[ProvisionedPerson, float]], conn: sqlite3.Connection
) -> list[ProvisionedPerson | StoreError]:
    """`_create` for each job, in sqlite3's own statements on the writer's thread."""
    outcomes: list[ProvisionedPerson | StoreError] = []
    for person, now in jobs:
        name = person.user_name.lower()
        rows = conn.execute(
            _FIND_SQLITE, (name, person.external_id, DEPROVISIONED, name, person.external_id, person.id)
        ).fetchall()
        if any(row[4] for row in rows):
            outcomes.append(
                StoreConflict(
                    f"user name {person.user_name!r} or external id {person.external_id!r} is taken"
                )
            )
            continue
        old = next((row for row in rows if row[0] == person.id), None)
        ident = _new_id(person, old[1] if old is not None else None)
        details = (person.user_name, person.email, person.name, person.external_id, not person.active)
        if ident != person.id or old is None:
            conn.execute(_INSERT_SQLITE, (ident, *details, now, now))
            outcomes.append(replace(person, id=ident, version=1, created_at=now, updated_at=now))
        else:
            conn.execute(_REVIVE_SQLITE, (*details, old[2] + 1, now, ident))
            outcomes.append(replace(person, id=ident, version=old[2] + 1, created_at=old[3], updated_at=now))
    return outcomes
