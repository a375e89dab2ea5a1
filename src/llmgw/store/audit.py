"""The audit log in the store (`audit_log`): an action recorded, and the newest read
back for the dashboard's Audit page. Rows are only added; nothing here changes one."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine

from llmgw.store import schema
from llmgw.store.engine import transaction

_TABLE = schema.audit_log


@dataclass(frozen=True)
class AuditEntry:
    at: float
    actor: str
    """Who: `operator (session)` or `operator (bearer)` for the admin token's holder."""
    action: str
    """What: `key.revoke`, `model.scale`."""
    target: str
    outcome: str
    """`done`, or why not."""


class AuditRepo:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def record(self, entry: AuditEntry) -> None:
        row = {
            "id": secrets.token_hex(8),
            "at": entry.at,
            "actor": entry.actor,
            "action": entry.action,
            "target": entry.target,
            "outcome": entry.outcome,
        }
        async with transaction(self._engine) as conn:
            await conn.execute(_TABLE.insert().values(**row))

    async def newest(self, limit: int) -> list[AuditEntry]:
        query = _TABLE.select().order_by(_TABLE.c.at.desc(), _TABLE.c.id).limit(limit)
        async with transaction(self._engine) as conn:
            rows = (await conn.execute(query)).mappings().all()
        return [
            AuditEntry(
                at=float(row["at"]),
                actor=str(row["actor"]),
                action=str(row["action"]),
                target=str(row["target"]),
                outcome=str(row["outcome"]),
            )
            for row in rows
        ]
