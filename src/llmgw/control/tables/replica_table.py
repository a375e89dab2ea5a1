"""The replica set in the store: how servers that do not lead still route to replicas.

Agents connect only to the leading control plane, so only the leader learns where the
replicas serve. It writes the set it publishes to its own router into the
`control_replicas` table, one row per routable replica, all rows rewritten together and
stamped with its lease term; every other server reads the table each
`control.interval` and publishes it into its own router.

Writes are fenced like orders: the write happens in one transaction that first reads
(and on PostgreSQL locks) the lease row, and goes ahead only while the writer is the
row's holder at its term and the lease has not expired. A deposed leader that wakes up
late cannot overwrite its successor's set.

Reads are judged by `servable`: rows written under the current term are served; rows
left by an earlier term are served only for `grace` after the current term began (the
new leader waits `unreachable_after` for the agents before it writes its own set, and
the replicas it adopts are the same ones), then dropped, so a follower never routes by a
set that no living leader vouches for.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

import orjson
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from llmgw.control.decisions.publish import SCHEDULING_LABEL, lora_ids_of
from llmgw.router.endpoints import EndpointSpec
from llmgw.store import schema
from llmgw.store.engine import transaction, upsert
from llmgw.store.lease import LEASE_NAME, LeaseStatus, database_now, lease_record

_REPLICAS = schema.control_replicas
_LEASES = schema.control_lease


@dataclass(frozen=True)
class StoredReplica:
    """One row of the table: a routable replica as its leader published it."""

    replica_id: str
    model: str
    url: str
    engine: str = ""
    weight: float = 1.0
    pool: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    term: int = 0
    updated_at: float = 0.0

    @classmethod
    def of(cls, spec: EndpointSpec, term: int, updated_at: float) -> StoredReplica:
        return cls(
            replica_id=spec.id,
            model=spec.models[0] if spec.models else "",
            url=spec.url,
            engine=spec.engine,
            weight=spec.weight,
            pool=spec.pool,
            labels=dict(spec.labels),
            term=term,
            updated_at=updated_at,
        )

    def spec(self, api_key: str) -> EndpointSpec:
        """The router's entry for it; the key is the engine's, derived on each server."""
        return EndpointSpec(
            id=self.replica_id,
            url=self.url,
            models=(self.model,),
            engine=self.engine,
            api_key=api_key,
            weight=self.weight,
            pool=self.pool,
            labels=dict(self.labels),
            priority_scheduling=self.labels.get(SCHEDULING_LABEL) == "priority",
            lora_ids=lora_ids_of(self.labels),
        )


@dataclass(frozen=True)
class ReplicaSnapshot:
    """The table and the lease, read in one transaction, with the database's time."""

    replicas: tuple[StoredReplica, ...]
    lease: LeaseStatus


def servable(snapshot: ReplicaSnapshot, grace: timedelta) -> tuple[StoredReplica, ...]:
    """The rows a follower may route by: those of the current term, and those of an
    earlier term only within `grace` of the current term's start."""
    record = snapshot.lease.record
    if record is None:
        return snapshot.replicas
    current = [r for r in snapshot.replicas if r.term >= record.term]
    if len(current) == len(snapshot.replicas):
        return snapshot.replicas
    if snapshot.lease.now - record.acquired_at <= grace.total_seconds():
        return snapshot.replicas
    return tuple(current)


def _row_values(row: StoredReplica) -> dict[str, object]:
    return {
        "replica_id": row.replica_id,
        "model": row.model,
        "url": row.url,
        "engine": row.engine,
        "weight": row.weight,
        "pool": row.pool,
        "labels": orjson.dumps(row.labels, option=orjson.OPT_SORT_KEYS).decode(),
        "term": row.term,
        "updated_at": row.updated_at,
    }


def _labels(text: str) -> dict[str, str]:
    try:
        loaded = orjson.loads(text or "{}")
    except orjson.JSONDecodeError:
        return {}
    return {str(k): str(v) for k, v in loaded.items()} if isinstance(loaded, dict) else {}


class ReplicaTable:
    """The `control_replicas` rows: the leader's fenced write, everyone's read.

    `db_time` replaces the database's clock (tests); None uses the database's own."""

    def __init__(
        self, engine: AsyncEngine, *, lease_name: str = LEASE_NAME, db_time: Callable[[], float] | None = None
    ) -> None:
        self._engine = engine
        self.lease_name = lease_name
        self._db_time = db_time

    async def write(self, specs: Sequence[EndpointSpec], *, holder: str, term: int) -> bool:
        """Makes the table exactly `specs`, stamped `term`, if `holder` holds the lease at
        `term` now; returns whether it wrote. StoreError when the store cannot be reached."""
        async with transaction(self._engine) as conn:
            now = float((await conn.execute(sa.select(database_now(conn, self._db_time)))).scalar_one())
            lease = _LEASES.select().where(_LEASES.c.name == self.lease_name)
            if conn.dialect.name == "postgresql":
                # Held until commit: a rival's claim of the lease waits for this write.
                lease = lease.with_for_update()
            held = lease_record((await conn.execute(lease)).first())
            if held is None or held.holder != holder or held.term != term or held.expires_at <= now:
                return False
            ids = [spec.id for spec in specs]
            await conn.execute(_REPLICAS.delete().where(_REPLICAS.c.replica_id.not_in(ids)))
            if specs:
                rows = [_row_values(StoredReplica.of(spec, term, now)) for spec in specs]
                insert = upsert(conn, _REPLICAS)
                statement = insert.on_conflict_do_update(
                    index_elements=["replica_id"],
                    set_={name: insert.excluded[name] for name in rows[0] if name != "replica_id"},
                )
                await conn.execute(statement, rows)
        return True

    async def read(self) -> ReplicaSnapshot:
        """Every row and the lease, as one consistent reading."""
        async with transaction(self._engine) as conn:
            now = float((await conn.execute(sa.select(database_now(conn, self._db_time)))).scalar_one())
            lease = (await conn.execute(_LEASES.select().where(_LEASES.c.name == self.lease_name))).first()
            rows = (await conn.execute(_REPLICAS.select().order_by(_REPLICAS.c.replica_id))).all()
        replicas = tuple(
            StoredReplica(
                replica_id=str(row.replica_id),
                model=str(row.model),
                url=str(row.url),
                engine=str(row.engine),
                weight=float(row.weight),
                pool=str(row.pool),
                labels=_labels(str(row.labels)),
                term=int(row.term),
                updated_at=float(row.updated_at),
            )
            for row in rows
        )
        return ReplicaSnapshot(replicas, LeaseStatus(lease_record(lease), now))
