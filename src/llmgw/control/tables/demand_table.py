"""The demand rows in the store: every server's report of what its router saw, for the
leader to plan with (`llmgw.control.decisions.demand`).

One row per (model, server): when the model was last asked for there, since when a
request there has waited for it (NULL: none waits), and when the server last wrote. A
server writes only its own rows; the leader reads them all.

Times are kept on the database's clock, like the lease's, so that servers whose clocks
disagree still agree: a server converts its own times by one reading of both clocks
taken in the writing transaction, and the leader converts back the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from llmgw.control.decisions.demand import Asked, ServerDemand
from llmgw.store import schema
from llmgw.store.engine import transaction, upsert
from llmgw.store.lease import database_now

_DEMAND = schema.control_demand


@dataclass(frozen=True)
class DemandSnapshot:
    """Every server's rows, on the database's clock, and that clock when they were read."""

    rows: tuple[ServerDemand, ...]
    now: float


class DemandTable:
    """The `control_demand` rows: each server's write of its own, the leader's read.

    `db_time` replaces the database's clock (tests); None uses the database's own. Every
    method raises StoreError when the store cannot be reached."""

    def __init__(self, engine: AsyncEngine, db_time: Callable[[], float] | None = None) -> None:
        self._engine = engine
        self._db_time = db_time

    async def _now(self, conn: AsyncConnection) -> float:
        return float((await conn.execute(sa.select(database_now(conn, self._db_time)))).scalar_one())

    async def write(
        self,
        holder: str,
        changed: Mapping[str, Asked],
        gone: Sequence[str] = (),
        *,
        local_now: float,
    ) -> None:
        """Writes `holder`'s reports for the `changed` models (times on the clock that
        read `local_now` just now), deletes its rows for the `gone` ones, and marks all
        its rows alive."""
        async with transaction(self._engine) as conn:
            now = await self._now(conn)
            shift = now - local_now

            def stored(at: float | None) -> float | None:
                return None if at is None else at + shift

            if gone:
                await conn.execute(
                    _DEMAND.delete().where(_DEMAND.c.holder == holder, _DEMAND.c.model.in_(gone))
                )
            if changed:
                rows = [
                    {
                        "model": model,
                        "holder": holder,
                        "last_asked": stored(asked.last_asked),
                        "waiting_since": stored(asked.waiting_since),
                        "updated_at": now,
                    }
                    for model, asked in sorted(changed.items())
                ]
                insert = upsert(conn, _DEMAND)
                statement = insert.on_conflict_do_update(
                    index_elements=["model", "holder"],
                    set_={
                        name: insert.excluded[name] for name in ("last_asked", "waiting_since", "updated_at")
                    },
                )
                await conn.execute(statement, rows)
            await conn.execute(_DEMAND.update().where(_DEMAND.c.holder == holder).values(updated_at=now))

    async def touch(self, holder: str) -> int:
        """Marks `holder`'s rows alive; returns how many it has (0: they were forgotten,
        or it never wrote any)."""
        async with transaction(self._engine) as conn:
            now = await self._now(conn)
            done = await conn.execute(
                _DEMAND.update().where(_DEMAND.c.holder == holder).values(updated_at=now)
            )
        return int(done.rowcount)

    async def read(self) -> DemandSnapshot:
        """Every row, with the database's time, as one reading."""
        async with transaction(self._engine) as conn:
            now = await self._now(conn)
            found = (await conn.execute(_DEMAND.select().order_by(_DEMAND.c.model, _DEMAND.c.holder))).all()
        rows = tuple(
            ServerDemand(
                model=str(row.model),
                holder=str(row.holder),
                asked=Asked(_seconds(row.last_asked), _seconds(row.waiting_since)),
                updated_at=float(row.updated_at),
            )
            for row in found
        )
        return DemandSnapshot(rows, now)

    async def forget(self, silent_for: timedelta) -> int:
        """Deletes the rows of servers silent for longer than `silent_for` (servers
        that ended: a restarted one writes under a new name); returns how many."""
        async with transaction(self._engine) as conn:
            now = await self._now(conn)
            done = await conn.execute(
                _DEMAND.delete().where(_DEMAND.c.updated_at < now - silent_for.total_seconds())
            )
        return int(done.rowcount)


def _seconds(value: float | None) -> float | None:
    return None if value is None else float(value)
