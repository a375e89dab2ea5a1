"""Guard policy attachments in the store: which policies apply where in the tenancy
tree, read by every gateway (llmgw.guard.attachments) and changed by the admin API."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from llmgw.store import schema
from llmgw.store.engine import transaction

_TABLE = schema.guard_attachments

Attachment = tuple[str, str, str]
"""(scope kind, scope id, policy)."""


class GuardRepo:
    """Queries over guard attachments."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def all(self) -> list[Attachment]:
        query = sa.select(_TABLE.c.scope_kind, _TABLE.c.scope_id, _TABLE.c.policy).order_by(
            _TABLE.c.scope_kind, _TABLE.c.scope_id, _TABLE.c.policy
        )
        async with transaction(self._engine) as conn:
            rows = (await conn.execute(query)).all()
        return [(r[0], r[1], r[2]) for r in rows]

    async def attach(self, kind: str, scope_id: str, policy: str, now: float) -> bool:
        """Attaches; False when it was attached already."""
        where = (_TABLE.c.scope_kind == kind) & (_TABLE.c.scope_id == scope_id) & (_TABLE.c.policy == policy)
        async with transaction(self._engine) as conn:
            if (await conn.execute(sa.select(_TABLE.c.policy).where(where))).first() is not None:
                return False
            await conn.execute(
                _TABLE.insert().values(scope_kind=kind, scope_id=scope_id, policy=policy, created_at=now)
            )
        return True

    async def detach(self, kind: str, scope_id: str, policy: str) -> bool:
        """Detaches; False when it was not attached."""
        where = (_TABLE.c.scope_kind == kind) & (_TABLE.c.scope_id == scope_id) & (_TABLE.c.policy == policy)
        async with transaction(self._engine) as conn:
            result = await conn.execute(_TABLE.delete().where(where))
        return bool(result.rowcount)
