"""Webhook deliveries in the store (`notify_deliveries`): queued, claimed, settled, and
listed for the delivery log. The outbox (llmgw.notify.outbox) decides; this module only
speaks SQL.

A row is claimed before it is sent by moving its `next_at` past the attempt (an
UPDATE that matches only the `next_at` read), so two servers sharing a store never send
one delivery at once, and a server that dies mid-attempt leaves the row to be tried
again when that time passes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from llmgw.store import schema
from llmgw.store.engine import transaction, upsert

_TABLE = schema.notify_deliveries

PENDING = "pending"
DELIVERED = "delivered"
FAILED = "failed"


@dataclass(frozen=True)
class Delivery:
    """One event for one webhook."""

    event_id: str
    webhook: str
    event_type: str
    body: str
    state: str
    attempts: int
    created_at: float
    next_at: float
    last_error: str
    last_status: int | None
    delivered_at: float | None

    def as_json(self) -> dict[str, object]:
        return {
            "event_id": self.event_id,
            "webhook": self.webhook,
            "type": self.event_type,
            "state": self.state,
            "attempts": self.attempts,
            "created_at": self.created_at,
            "next_at": self.next_at if self.state == PENDING else None,
            "last_status": self.last_status,
            "last_error": self.last_error,
            "delivered_at": self.delivered_at,
        }


def _delivery(row: sa.Row[tuple[object, ...]]) -> Delivery:
    m = row._mapping
    return Delivery(
        event_id=str(m["event_id"]),
        webhook=str(m["webhook"]),
        event_type=str(m["event_type"]),
        body=str(m["body"]),
        state=str(m["state"]),
        attempts=int(m["attempts"]),
        created_at=float(m["created_at"]),
        next_at=float(m["next_at"]),
        last_error=str(m["last_error"]),
        last_status=None if m["last_status"] is None else int(m["last_status"]),
        delivered_at=None if m["delivered_at"] is None else float(m["delivered_at"]),
    )


class NotifyRepo:
    """Queries over webhook deliveries."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def enqueue(self, rows: Sequence[tuple[str, str, str, str]], now: float) -> int:
        """Queues (event id, webhook, type, body) rows due now; a row already there (the
        same event emitted again) is left as it is. Returns how many were new."""
        added = 0
        async with transaction(self._engine) as conn:
            for event_id, webhook, event_type, body in rows:
                insert = upsert(conn, _TABLE).values(
                    event_id=event_id,
                    webhook=webhook,
                    event_type=event_type,
                    body=body,
                    state=PENDING,
                    attempts=0,
                    created_at=now,
                    next_at=now,
                    last_error="",
                )
                result = await conn.execute(
                    insert.on_conflict_do_nothing(index_elements=["event_id", "webhook"])
                )
                added += max(result.rowcount, 0)
        return added

    async def record(
        self, row: tuple[str, str, str, str], *, state: str, status: int | None, error: str, now: float
    ) -> None:
        """Keeps one delivery already attempted once (a test event), settled as `state`."""
        event_id, webhook, event_type, body = row
        async with transaction(self._engine) as conn:
            await conn.execute(
                _TABLE.insert().values(
                    event_id=event_id,
                    webhook=webhook,
                    event_type=event_type,
                    body=body,
                    state=state,
                    attempts=1,
                    created_at=now,
                    next_at=now,
                    last_error=error[:500],
                    last_status=status,
                    delivered_at=now if state == DELIVERED else None,
                )
            )

    async def due(self, now: float, limit: int) -> list[Delivery]:
        """Pending deliveries whose time has come, oldest first."""
        query = (
            sa.select(_TABLE)
            .where((_TABLE.c.state == PENDING) & (_TABLE.c.next_at <= now))
            .order_by(_TABLE.c.next_at, _TABLE.c.created_at)
            .limit(limit)
        )
        async with transaction(self._engine) as conn:
            return [_delivery(r) for r in (await conn.execute(query)).all()]

    async def next_due(self) -> float | None:
        """When the soonest pending delivery is due; None when none is pending."""
        query = sa.select(sa.func.min(_TABLE.c.next_at)).where(_TABLE.c.state == PENDING)
        async with transaction(self._engine) as conn:
            value = (await conn.execute(query)).scalar()
        return None if value is None else float(value)

    async def claim(self, delivery: Delivery, until: float) -> bool:
        """Takes `delivery` for one attempt ending by `until`; False when another server
        took it first."""
        where = (
            (_TABLE.c.event_id == delivery.event_id)
            & (_TABLE.c.webhook == delivery.webhook)
            & (_TABLE.c.state == PENDING)
            & (_TABLE.c.next_at == delivery.next_at)
        )
        async with transaction(self._engine) as conn:
            result = await conn.execute(_TABLE.update().where(where).values(next_at=until))
        return bool(result.rowcount)

    async def settle(
        self,
        delivery: Delivery,
        *,
        state: str,
        status: int | None,
        error: str,
        now: float,
        next_at: float | None = None,
    ) -> None:
        """Records one attempt: delivered, pending again at `next_at`, or failed."""
        values: dict[str, object] = {
            "state": state,
            "attempts": _TABLE.c.attempts + 1,
            "last_status": status,
            "last_error": error[:500],
        }
        if state == DELIVERED:
            values["delivered_at"] = now
        if next_at is not None:
            values["next_at"] = next_at
        where = (_TABLE.c.event_id == delivery.event_id) & (_TABLE.c.webhook == delivery.webhook)
        async with transaction(self._engine) as conn:
            await conn.execute(_TABLE.update().where(where).values(**values))

    async def purge(self, before: float) -> int:
        """Deletes delivered and given-up deliveries created before `before`; how many."""
        where = (_TABLE.c.state != PENDING) & (_TABLE.c.created_at < before)
        async with transaction(self._engine) as conn:
            result = await conn.execute(_TABLE.delete().where(where))
        return max(result.rowcount, 0)

    async def log(self, webhook: str | None, limit: int) -> list[Delivery]:
        """The newest deliveries first, of one webhook or all."""
        query = sa.select(_TABLE).order_by(_TABLE.c.created_at.desc(), _TABLE.c.event_id).limit(limit)
        if webhook:
            query = query.where(_TABLE.c.webhook == webhook)
        async with transaction(self._engine) as conn:
            return [_delivery(r) for r in (await conn.execute(query)).all()]
