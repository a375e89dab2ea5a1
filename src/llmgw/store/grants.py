"""Roles granted by operators: a person made admin or member of an org
(`org_memberships`), a team (`team_memberships`) or a project (`memberships`).

A grant is an upsert: granting again changes the role. A team membership granted here
is the operator's (`source` manual), so the next sign-in's groups sync leaves it alone
even where sign-in made it first. Revoking deletes the row, whoever made it.
"""

from __future__ import annotations

from typing import Literal

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from llmgw.errors import StoreMissing
from llmgw.store import schema
from llmgw.store.engine import transaction

RoleKind = Literal["org", "team", "project"]
ROLE_KINDS: tuple[RoleKind, ...] = ("org", "team", "project")
ROLE_NAMES = ("admin", "member")
_MANUAL = "manual"


def role_kind(text: str) -> RoleKind | None:
    """`text` as a kind of scope a role is held in, or None."""
    for kind in ROLE_KINDS:
        if text == kind:
            return kind
    return None


# Each kind's membership table and the column naming its scope.
_TABLES: dict[str, tuple[sa.Table, str, sa.Table]] = {
    "org": (schema.org_memberships, "org_id", schema.orgs),
    "team": (schema.team_memberships, "team_id", schema.teams),
    "project": (schema.memberships, "project_id", schema.projects),
}


class GrantRepo:
    """Grants and revokes people's roles."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def grant(self, user_id: str, kind: RoleKind, scope_id: str, role: str, now: float) -> None:
        """Makes `user_id` `role` of the scope; `StoreMissing` naming whichever of the
        person and the scope does not exist."""
        if role not in ROLE_NAMES:
            raise ValueError(f"role {role!r} is not one of {', '.join(ROLE_NAMES)}")
        table, column, scopes = _TABLES[kind]
        async with transaction(self._engine) as conn:
            users = schema.users
            if (await conn.execute(sa.select(users.c.id).where(users.c.id == user_id))).first() is None:
                raise StoreMissing(f"user {user_id!r} does not exist")
            if (await conn.execute(sa.select(scopes.c.id).where(scopes.c.id == scope_id))).first() is None:
                raise StoreMissing(f"{kind} {scope_id!r} does not exist")
            where = (table.c.user_id == user_id, table.c[column] == scope_id)
            values: dict[str, object] = {"role": role}
            if kind == "team":
                values["source"] = _MANUAL
            changed = await conn.execute(table.update().where(*where).values(**values))
            if changed.rowcount == 0:
                await conn.execute(
                    table.insert().values(user_id=user_id, created_at=now, **{column: scope_id}, **values)
                )

    async def revoke(self, user_id: str, kind: RoleKind, scope_id: str) -> None:
        """Ends the person's role in the scope; `StoreMissing` when they hold none."""
        table, column, _ = _TABLES[kind]
        async with transaction(self._engine) as conn:
            result = await conn.execute(
                table.delete().where(table.c.user_id == user_id, table.c[column] == scope_id)
            )
            if result.rowcount == 0:
                raise StoreMissing(f"user {user_id!r} holds no role in {kind} {scope_id!r}")
