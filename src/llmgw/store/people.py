"""People as sign-in sees them: found by OIDC subject or e-mail, made on first sign-in
or signup, approved or rejected, and the team memberships their groups claim brings.

The tenancy queries (`store.tenancy`) treat a person as one more scope with limits;
these treat them as someone who signs in. Memberships carry their `source`, so a
sign-in's groups sync touches only the memberships sign-in made (`oidc`), never an
operator's (`manual`) or SCIM's.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from llmgw.errors import StoreMissing
from llmgw.store import schema
from llmgw.store.engine import transaction

STATUSES = ("active", "pending", "rejected")
OIDC_SOURCE = "oidc"


@dataclass(frozen=True, slots=True)
class Person:
    """One row of `users`, as sign-in needs it."""

    id: str
    email: str | None = None
    name: str | None = None
    subject: str | None = None
    status: str = "active"
    disabled: bool = False
    signup_reason: str | None = None


@dataclass(frozen=True, slots=True)
class Role:
    """A person's role in one org, team or project."""

    kind: str
    """org, team or project."""
    id: str
    role: str
    source: str = "manual"


def _person(row: sa.RowMapping) -> Person:
    return Person(
        id=row["id"],
        email=row["email"],
        name=row["name"],
        subject=row["subject"],
        status=row["status"],
        disabled=bool(row["disabled"]),
        signup_reason=row["signup_reason"],
    )


class PeopleRepo:
    """Queries over `users` and the membership tables for sign-in and signup."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def get(self, user_id: str) -> Person | None:
        u = schema.users
        async with transaction(self._engine) as conn:
            row = (await conn.execute(u.select().where(u.c.id == user_id))).mappings().first()
        return None if row is None else _person(row)

    async def by_subject(self, subject: str) -> Person | None:
        u = schema.users
        async with transaction(self._engine) as conn:
            row = (await conn.execute(u.select().where(u.c.subject == subject))).mappings().first()
        return None if row is None else _person(row)

    async def by_email(self, email: str) -> list[Person]:
        """Everyone with this address, in any letter case (an address is not unique in
        `users`: operators made people before sign-in existed)."""
        u = schema.users
        query = u.select().where(sa.func.lower(u.c.email) == email.lower()).order_by(u.c.id)
        async with transaction(self._engine) as conn:
            rows = (await conn.execute(query)).mappings().all()
        return [_person(row) for row in rows]

    async def create(self, person: Person, now: float) -> Person:
        """Inserts a new person; `StoreConflict` when the id or subject is taken."""
        async with transaction(self._engine) as conn:
            await conn.execute(
                schema.users.insert().values(
                    id=person.id,
                    email=person.email,
                    name=person.name,
                    subject=person.subject,
                    status=person.status,
                    disabled=person.disabled,
                    signup_reason=person.signup_reason,
                    created_at=now,
                    updated_at=now,
                )
            )
        return person

    async def link(self, user_id: str, subject: str, name: str | None, email: str | None, now: float) -> None:
        """Records the provider's subject on a person found by e-mail, and fills the name
        and address where they were empty."""
        u = schema.users
        async with transaction(self._engine) as conn:
            await conn.execute(
                u.update()
                .where(u.c.id == user_id)
                .values(
                    subject=subject,
                    name=sa.func.coalesce(u.c.name, name),
                    email=sa.func.coalesce(u.c.email, email),
                    version=u.c.version + 1,
                    updated_at=now,
                )
            )

    async def set_status(self, user_id: str, status: str, now: float) -> Person:
        """Approves (`active`) or rejects a person; `StoreMissing` when there is none."""
        if status not in STATUSES:
            raise ValueError(f"status {status!r} is not one of {', '.join(STATUSES)}")
        u = schema.users
        async with transaction(self._engine) as conn:
            result = await conn.execute(
                u.update()
                .where(u.c.id == user_id)
                .values(status=status, version=u.c.version + 1, updated_at=now)
            )
            if result.rowcount == 0:
                raise StoreMissing(f"user {user_id!r} does not exist")
        found = await self.get(user_id)
        assert found is not None  # just written
        return found

    async def sync_oidc_teams(self, user_id: str, groups: Collection[str], now: float) -> tuple[str, ...]:
        """Makes the person's sign-in memberships those of the teams naming one of
        `groups`: joins the missing ones as member, leaves those no longer claimed.
        Memberships an operator or SCIM made are left alone. The teams joined or kept."""
        async with transaction(self._engine) as conn:
            wanted = await _teams_of_groups(conn, groups)
            m = schema.team_memberships
            rows = (
                await conn.execute(sa.select(m.c.team_id, m.c.source).where(m.c.user_id == user_id))
            ).all()
            have = {str(team): str(source) for team, source in rows}
            stale = [team for team, source in have.items() if source == OIDC_SOURCE and team not in wanted]
            if stale:
                await conn.execute(m.delete().where(m.c.user_id == user_id, m.c.team_id.in_(stale)))
            for team in sorted(wanted - set(have)):
                await conn.execute(
                    m.insert().values(
                        user_id=user_id, team_id=team, role="member", source=OIDC_SOURCE, created_at=now
                    )
                )
        return tuple(sorted(wanted))

    async def roles(self, user_id: str) -> tuple[Role, ...]:
        """Every org, team and project role the person holds."""
        o, t, p = schema.org_memberships, schema.team_memberships, schema.memberships
        async with transaction(self._engine) as conn:
            orgs = (await conn.execute(sa.select(o.c.org_id, o.c.role).where(o.c.user_id == user_id))).all()
            teams = (
                await conn.execute(sa.select(t.c.team_id, t.c.role, t.c.source).where(t.c.user_id == user_id))
            ).all()
            projects = (
                await conn.execute(sa.select(p.c.project_id, p.c.role).where(p.c.user_id == user_id))
            ).all()
        found = [Role("org", str(i), str(r)) for i, r in orgs]
        found += [Role("team", str(i), str(r), str(s)) for i, r, s in teams]
        found += [Role("project", str(i), str(r)) for i, r in projects]
        return tuple(sorted(found, key=lambda role: (role.kind, role.id)))


async def _teams_of_groups(conn: AsyncConnection, groups: Collection[str]) -> set[str]:
    if not groups:
        return set()
    t = schema.teams
    rows = (await conn.execute(sa.select(t.c.id).where(t.c.idp_group.in_(sorted(set(groups)))))).all()
    return {str(row[0]) for row in rows}
