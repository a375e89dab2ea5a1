"""Node certificates in the store (`node_certificates`): what `llmgw node add` issued and
what `llmgw node remove` revoked. The control plane reads the revoked serials
(`llmgw.control.runtime.cert_watch`) and refuses a node showing one. Serials are
upper-case hex without leading zeros (`llmgw.pki.serial_text`)."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from llmgw.store import schema
from llmgw.store.engine import transaction

_TABLE = schema.node_certificates


@dataclass(frozen=True)
class NodeCertificate:
    serial: str
    node_id: str
    not_after: float
    issued_at: float
    revoked_at: float | None


class NodeCertRepo:
    """Queries over issued node certificates."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def issued(self, serial: str, node_id: str, not_after: float, now: float) -> None:
        async with transaction(self._engine) as conn:
            await conn.execute(
                _TABLE.insert().values(serial=serial, node_id=node_id, not_after=not_after, issued_at=now)
            )

    async def revoke(self, node_id: str, now: float) -> list[str]:
        """Revokes every certificate of `node_id` not revoked yet; the serials revoked."""
        async with transaction(self._engine) as conn:
            live = (_TABLE.c.node_id == node_id) & _TABLE.c.revoked_at.is_(None)
            serials = [str(s) for s in (await conn.execute(sa.select(_TABLE.c.serial).where(live))).scalars()]
            if serials:
                await conn.execute(_TABLE.update().where(live).values(revoked_at=now))
        return serials

    async def revoked_serials(self) -> frozenset[str]:
        async with transaction(self._engine) as conn:
            query = sa.select(_TABLE.c.serial).where(_TABLE.c.revoked_at.is_not(None))
            return frozenset(str(s) for s in (await conn.execute(query)).scalars())

    async def of_node(self, node_id: str) -> list[NodeCertificate]:
        async with transaction(self._engine) as conn:
            query = sa.select(_TABLE).where(_TABLE.c.node_id == node_id).order_by(_TABLE.c.issued_at)
            return [NodeCertificate(**dict(r._mapping)) for r in (await conn.execute(query)).all()]
