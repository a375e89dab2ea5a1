"""Organisations, teams, projects, people and memberships in the store.

The four levels share one shape (`Scope`) and so one set of queries, chosen by kind.
Deleting a level that others still refer to (a team with projects, a project with keys)
is refused by the database's foreign keys and comes out as `StoreConflict`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from llmgw.errors import StoreMissing
from llmgw.store import schema
from llmgw.store.engine import transaction
from llmgw.store.rows import PARENT_FIELD, Membership, Scope, ScopeKind

TABLES: dict[ScopeKind, sa.Table] = {
    "org": schema.orgs,
    "team": schema.teams,
    "project": schema.projects,
    "user": schema.users,
}
QUOTA_KINDS: tuple[ScopeKind, ...] = ("org", "team", "project")
"""The levels that own models, and so may have a GPU quota."""
# The settings an operator may change on a scope after creating it.
SETTABLE: frozenset[str] = frozenset(
    {
        "rpm",
        "tpm",
        "budget_micros",
        "budget_period",
        "allowed_models",
        "band",
        "max_key_ttl_s",
        "gpu_quota",
        "cache_ttl_s",
        "email",
        "disabled",
        "idp_group",
    }
)


def _models_text(models: Sequence[str] | None) -> str | None:
    return None if models is None else orjson.dumps(list(models)).decode()


def _models(text: str | None) -> tuple[str, ...] | None:
    return None if text is None else tuple(orjson.loads(text))


def scope_from_row(kind: ScopeKind, row: sa.RowMapping) -> Scope:
    parent_field = PARENT_FIELD[kind]
    return Scope(
        kind=kind,
        id=row["id"],
        parent=row[parent_field] if parent_field else None,
        rpm=row["rpm"],
        tpm=row["tpm"],
        budget_micros=row["budget_micros"],
        budget_period=row["budget_period"],
        allowed_models=_models(row["allowed_models"]),
        band=row["band"],
        max_key_ttl_s=row.get("max_key_ttl_s"),
        gpu_quota=row.get("gpu_quota"),
        cache_ttl_s=row.get("cache_ttl_s") if kind == "project" else None,
        email=row.get("email"),
        disabled=bool(row.get("disabled", False)),
        status=str(row.get("status") or "active"),
        idp_group=row.get("idp_group") if kind == "team" else None,
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def _values(scope: Scope) -> dict[str, Any]:
    values: dict[str, Any] = {
        "id": scope.id,
        "rpm": scope.rpm,
        "tpm": scope.tpm,
        "budget_micros": scope.budget_micros,
        "budget_period": scope.budget_period,
        "allowed_models": _models_text(scope.allowed_models),
        "band": scope.band,
        "created_at": scope.created_at,
        "updated_at": scope.updated_at,
    }
    parent_field = PARENT_FIELD[scope.kind]
    if parent_field:
        values[parent_field] = scope.parent
    if scope.kind == "user":
        values["email"] = scope.email
        values["disabled"] = scope.disabled
    else:
        values["max_key_ttl_s"] = scope.max_key_ttl_s
        values["gpu_quota"] = scope.gpu_quota
    if scope.kind == "team":
        values["idp_group"] = scope.idp_group
    if scope.kind == "project":
        values["cache_ttl_s"] = scope.cache_ttl_s
    return values


class TenancyRepo:
    """Queries over the tenancy tree."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def create(self, scope: Scope) -> Scope:
        """Inserts a new scope; `StoreConflict` when the id is taken or the parent missing."""
        async with transaction(self._engine) as conn:
            await conn.execute(TABLES[scope.kind].insert().values(**_values(scope)))
        return scope

    async def get(self, kind: ScopeKind, scope_id: str) -> Scope:
        table = TABLES[kind]
        async with transaction(self._engine) as conn:
            row = (await conn.execute(table.select().where(table.c.id == scope_id))).mappings().first()
        if row is None:
            raise StoreMissing(f"{kind} {scope_id!r} does not exist")
        return scope_from_row(kind, row)

    async def find(self, kind: ScopeKind, parent: str | None = None) -> list[Scope]:
        table = TABLES[kind]
        query = table.select().order_by(table.c.id)
        parent_field = PARENT_FIELD[kind]
        if parent is not None and parent_field:
            query = query.where(table.c[parent_field] == parent)
        async with transaction(self._engine) as conn:
            rows = (await conn.execute(query)).mappings().all()
        return [scope_from_row(kind, row) for row in rows]

    async def changed_since(self, kind: ScopeKind, since: float) -> list[Scope]:
        """Scopes written at or after `since`, for the gateways' caches."""
        table = TABLES[kind]
        async with transaction(self._engine) as conn:
            rows = (await conn.execute(table.select().where(table.c.updated_at >= since))).mappings().all()
        return [scope_from_row(kind, row) for row in rows]

    async def update(self, kind: ScopeKind, scope_id: str, changes: Mapping[str, Any], now: float) -> Scope:
        """Sets the given settings (None clears one back to inherited)."""
        unknown = set(changes) - SETTABLE
        if kind == "user":
            # A person owns no models: GPU quotas are per org, team and project.
            unknown |= set(changes) & {"gpu_quota"}
        if kind != "team":
            # Only a team gathers the members of an identity provider's group.
            unknown |= set(changes) & {"idp_group"}
        if kind != "project":
            # The response cache is switched on per project.
            unknown |= set(changes) & {"cache_ttl_s"}
        if unknown:
            raise ValueError(f"cannot set {', '.join(sorted(unknown))} on a {kind}")
        values = dict(changes)
        if "allowed_models" in values:
            values["allowed_models"] = _models_text(values["allowed_models"])
        values["updated_at"] = now
        table = TABLES[kind]
        if kind == "user":
            # SCIM's ETag: a provider's next write sees this one.
            values["version"] = table.c.version + 1
        async with transaction(self._engine) as conn:
            result = await conn.execute(table.update().where(table.c.id == scope_id).values(**values))
            if result.rowcount == 0:
                raise StoreMissing(f"{kind} {scope_id!r} does not exist")
        return await self.get(kind, scope_id)

    async def gpu_quotas(self) -> dict[str, int]:
        """Every GPU quota set, by the scope as a catalog's `owner` names it
        (`team:research`): one query, answered from the few rows that have one."""
        parts = [
            sa.select(sa.literal(kind).label("kind"), TABLES[kind].c.id, TABLES[kind].c.gpu_quota).where(
                TABLES[kind].c.gpu_quota.is_not(None)
            )
            for kind in QUOTA_KINDS
        ]
        async with transaction(self._engine) as conn:
            rows = (await conn.execute(sa.union_all(*parts))).all()
        return {f"{kind}:{ident}": int(quota) for kind, ident, quota in rows}

    async def parents_of(self, kind: ScopeKind, ids: Iterable[str]) -> dict[str, str]:
        """The org of each team, or the team of each project, among `ids`; ids that do
        not exist are left out."""
        wanted = sorted(set(ids))
        parent_field = PARENT_FIELD[kind]
        if not wanted or parent_field is None:
            return {}
        table = TABLES[kind]
        query = sa.select(table.c.id, table.c[parent_field]).where(table.c.id.in_(wanted))
        async with transaction(self._engine) as conn:
            rows = (await conn.execute(query)).all()
        return {str(ident): str(parent) for ident, parent in rows}

    async def delete(self, kind: ScopeKind, scope_id: str) -> None:
        table = TABLES[kind]
        async with transaction(self._engine) as conn:
            result = await conn.execute(table.delete().where(table.c.id == scope_id))
            if result.rowcount == 0:
                raise StoreMissing(f"{kind} {scope_id!r} does not exist")

    async def add_member(self, membership: Membership) -> Membership:
        async with transaction(self._engine) as conn:
            await conn.execute(
                schema.memberships.insert().values(
                    user_id=membership.user_id,
                    project_id=membership.project_id,
                    role=membership.role,
                    created_at=membership.created_at,
                )
            )
        return membership

    async def remove_member(self, user_id: str, project_id: str) -> None:
        table = schema.memberships
        async with transaction(self._engine) as conn:
            result = await conn.execute(
                table.delete().where(table.c.user_id == user_id, table.c.project_id == project_id)
            )
            if result.rowcount == 0:
                raise StoreMissing(f"user {user_id!r} is not a member of project {project_id!r}")

    async def members(self, *, project_id: str | None = None, user_id: str | None = None) -> list[Membership]:
        table = schema.memberships
        query = table.select().order_by(table.c.project_id, table.c.user_id)
        if project_id is not None:
            query = query.where(table.c.project_id == project_id)
        if user_id is not None:
            query = query.where(table.c.user_id == user_id)
        async with transaction(self._engine) as conn:
            rows = (await conn.execute(query)).mappings().all()
        return [Membership(r["user_id"], r["project_id"], r["role"], r["created_at"]) for r in rows]
