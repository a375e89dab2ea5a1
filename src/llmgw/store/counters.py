"""Shared rate-limit counts and the gateways' heartbeats in the store.

Each gateway upserts its own absolute count per (scope, window), so a push that is
repeated after a lost answer changes nothing, and reads the others' counts summed.
The heartbeats say how many gateways share the limits.

The exchange runs a few times a second for as long as the gateway does, so on a SQLite
file it is one call on the store's writer thread with plain SQL (`_exchange_sqlite`),
not a round trip to aiosqlite's thread per statement through SQLAlchemy, which cost a
gateway with auth on 2 % of a core while it served nothing at all.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Iterable, Sequence

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from llmgw.store import schema
from llmgw.store.engine import SqliteWorker, transaction, upsert

_COUNTS = schema.limit_counters
_GATEWAYS = schema.gateways

# (scope, window_start) -> (requests, tokens)
Counts = dict[tuple[str, int], tuple[int, int]]
Exchanged = tuple[Counts, int, float | None]
"""The others' sums, how many gateways are live (this one included), and when the one
heard from longest ago last pushed."""


class CounterRepo:
    """Queries over the shared counters and heartbeats."""

    def __init__(self, engine: AsyncEngine, sqlite: SqliteWorker | None = None) -> None:
        self._engine = engine
        self._sqlite = sqlite

    async def exchange(
        self,
        gateway: str,
        counts: Iterable[tuple[str, int, int, int]],
        since_window: int,
        now: float,
        live_within: float,
    ) -> Exchanged:
        """One round of sharing, in one transaction: writes this gateway's heartbeat and
        its counts (scope, window, requests, tokens), and reads the other gateways' sums
        for windows from `since_window` on, how many gateways are live, and when the
        one heard from longest ago last pushed (None when no other is live)."""
        if self._sqlite is not None:
            work = functools.partial(_exchange_sqlite, gateway, list(counts), since_window, now, live_within)
            return await self._sqlite.transaction(work)
        rows = [
            {"scope": s, "window_start": w, "gateway": gateway, "requests": r, "tokens": t}
            for s, w, r, t in counts
        ]
        async with transaction(self._engine) as conn:
            beat = upsert(conn, _GATEWAYS).values(id=gateway, host="", pid=0, started_at=now, last_seen=now)
            await conn.execute(beat.on_conflict_do_update(index_elements=["id"], set_={"last_seen": now}))
            if rows:
                insert = upsert(conn, _COUNTS)
                await conn.execute(
                    insert.on_conflict_do_update(
                        index_elements=["scope", "window_start", "gateway"],
                        set_={"requests": insert.excluded.requests, "tokens": insert.excluded.tokens},
                    ),
                    rows,
                )
            # Heartbeats before counts: a gateway that commits in between then looks
            # older than its counts are, which only makes the bet on it larger.
            live = await conn.execute(
                sa.select(sa.func.count(), sa.func.min(_GATEWAYS.c.last_seen))
                .select_from(_GATEWAYS)
                .where(_GATEWAYS.c.last_seen >= now - live_within, _GATEWAYS.c.id != gateway)
            )
            others_live, oldest = live.one()
            others = await conn.execute(
                sa.select(
                    _COUNTS.c.scope,
                    _COUNTS.c.window_start,
                    sa.func.sum(_COUNTS.c.requests),
                    sa.func.sum(_COUNTS.c.tokens),
                )
                .where(_COUNTS.c.window_start >= since_window, _COUNTS.c.gateway != gateway)
                .group_by(_COUNTS.c.scope, _COUNTS.c.window_start)
            )
            totals: Counts = {(s, int(w)): (int(r), int(t)) for s, w, r, t in others}
            return totals, 1 + int(others_live), None if oldest is None else float(oldest)

    async def register(self, gateway: str, host: str, pid: int, now: float) -> None:
        async with transaction(self._engine) as conn:
            insert = upsert(conn, _GATEWAYS).values(
                id=gateway, host=host, pid=pid, started_at=now, last_seen=now
            )
            await conn.execute(
                insert.on_conflict_do_update(
                    index_elements=["id"],
                    set_={"host": host, "pid": pid, "started_at": now, "last_seen": now},
                )
            )

    async def leave(self, gateway: str) -> None:
        """Removes a stopping gateway's heartbeat, so the others stop sharing with it."""
        async with transaction(self._engine) as conn:
            await conn.execute(_GATEWAYS.delete().where(_GATEWAYS.c.id == gateway))

    async def prune(self, before_window: int, gateways_before: float) -> None:
        """Drops counts of windows that no longer matter, and heartbeats long silent."""
        async with transaction(self._engine) as conn:
            await conn.execute(_COUNTS.delete().where(_COUNTS.c.window_start < before_window))
            await conn.execute(_GATEWAYS.delete().where(_GATEWAYS.c.last_seen < gateways_before))


def _exchange_sqlite(
    gateway: str,
    counts: Sequence[tuple[str, int, int, int]],
    since_window: int,
    now: float,
    live_within: float,
    conn: sqlite3.Connection,
) -> Exchanged:
    """`CounterRepo.exchange` on the SQLite writer's connection, inside its transaction."""
    conn.execute(
        "INSERT INTO gateways (id, host, pid, started_at, last_seen) VALUES (?, '', 0, ?, ?) "
        "ON CONFLICT (id) DO UPDATE SET last_seen = excluded.last_seen",
        (gateway, now, now),
    )
    conn.executemany(
        "INSERT INTO limit_counters (scope, window_start, gateway, requests, tokens) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (scope, window_start, gateway) "
        "DO UPDATE SET requests = excluded.requests, tokens = excluded.tokens",
        [(scope, window, gateway, requests, tokens) for scope, window, requests, tokens in counts],
    )
    # Heartbeats before counts, as `exchange` reads them.
    others_live, oldest = conn.execute(
        "SELECT count(*), min(last_seen) FROM gateways WHERE last_seen >= ? AND id != ?",
        (now - live_within, gateway),
    ).fetchone()
    totals: Counts = {
        (scope, int(window)): (int(requests), int(tokens))
        for scope, window, requests, tokens in conn.execute(
            "SELECT scope, window_start, sum(requests), sum(tokens) FROM limit_counters "
            "WHERE window_start >= ? AND gateway != ? GROUP BY scope, window_start",
            (since_window, gateway),
        )
    }
    return totals, 1 + int(others_live), None if oldest is None else float(oldest)
