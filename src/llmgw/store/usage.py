"""Usage in the store: per-request records, their five-minute sums, and the budgets'
spend ledger, all written by one transaction per batch so they never disagree.

Records are kept a batch to a row (`usage_batches`, migration 0008): the records of one
written batch that share a `RecordKey` in one row, their own values in a JSON array.
The store's work is then a row per caller, model and status in a batch rather than a
row per request, which cost more than everything else auth does for a request. They
are read a batch at a time (`records`), and the view `usage_records` shows them a
record to a row for SQL.

Pruning (`usage_retention`) deletes records only, whole batches by their newest record;
sums and spend are what totals and budgets read, and stay.
"""

from __future__ import annotations

import functools
import operator
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from llmgw.store import schema
from llmgw.store.engine import SqliteWorker, transaction
from llmgw.store.rows import RECORD_FIELDS, RECORD_KEY_SIZE, Records, RecordValues, UsageRow, UsageTotal

BUCKET_SECONDS = 300
GROUPS: dict[str, str] = {
    "org": "org_id",
    "team": "team_id",
    "project": "project_id",
    "user": "user_id",
    "key": "key_id",
    "model": "model",
}
"""What `llmgw usage --by` may group by, and the column of the sums it reads."""

# (scope, period, period_start) -> micro-units
SpendDeltas = Mapping[tuple[str, str, int], int]
_SUM_FIELDS = ("requests", "errors", "prompt_tokens", "completion_tokens", "cost_micros")


def bucket_of(ts: float) -> int:
    return int(ts // BUCKET_SECONDS) * BUCKET_SECONDS


SumKey = tuple[int, str, str, str, str, str, str]
"""A five-minute sum's identity: bucket, org, team, project, user, key (the empty string
for none) and model."""
Sums = dict[SumKey, list[int]]
"""Five-minute sums being gathered: requests, errors, prompt tokens, completion tokens,
cost in micro-units, per identity."""


def sum_key(
    bucket: int,
    key_id: str | None,
    user_id: str | None,
    project_id: str | None,
    team_id: str | None,
    org_id: str | None,
    model: str,
) -> SumKey:
    """A five-minute sum's identity for records of one caller and model in `bucket`
    (the empty string for an identity column a record leaves empty)."""
    return (bucket, org_id or "", team_id or "", project_id or "", user_id or "", key_id or "", model)


def add_to_sums(
    sums: Sums, key: SumKey, requests: int, errors: int, prompt: int, completion: int, cost: int
) -> None:
    """Counts requests (`errors` of them answered 4xx or 5xx) in their five-minute sum."""
    acc = sums.get(key)
    if acc is None:
        sums[key] = [requests, errors, prompt, completion, cost]
        return
    acc[0] += requests
    acc[1] += errors
    acc[2] += prompt
    acc[3] += completion
    acc[4] += cost


def merge_sums(into: Sums, more: Sums) -> None:
    """Adds the sums of `more` to `into`."""
    for key, values in more.items():
        acc = into.get(key)
        if acc is None:
            into[key] = list(values)
        else:
            for i, value in enumerate(values):
                acc[i] += value


def five_minute_sums(rows: Iterable[UsageRow]) -> Sums:
    """The records' sums per five minutes and identity (tenancy, key, model)."""
    sums: Sums = {}
    for row in rows:
        key = sum_key(
            bucket_of(row.ts), row.key_id, row.user_id, row.project_id, row.team_id, row.org_id, row.model
        )
        errors = 1 if row.status >= 400 else 0
        add_to_sums(sums, key, 1, errors, row.prompt_tokens, row.completion_tokens, row.cost_micros)
    return sums


def group_rows(rows: Iterable[UsageRow]) -> Records:
    """Whole records grouped as `write_batch` takes them."""
    records: Records = {}
    for row in rows:
        records.setdefault(row[:RECORD_KEY_SIZE], []).append(row[RECORD_KEY_SIZE:])
    return records


_KEY_COLUMNS = UsageRow._fields[:RECORD_KEY_SIZE]
_BATCH_COLUMNS = (*_KEY_COLUMNS, "first_ts", "last_ts", "record_count", "records")
_TS = operator.itemgetter(0)


def _insert_batch_sql(paramstyle: str) -> str:
    """The INSERT of one batch row, in the driver's parameter style."""
    if paramstyle == "qmark":
        marks = ", ".join("?" for _ in _BATCH_COLUMNS)
    else:
        marks = ", ".join(f"${i}" for i in range(1, len(_BATCH_COLUMNS) + 1))
    return f"INSERT INTO usage_batches ({', '.join(_BATCH_COLUMNS)}) VALUES ({marks})"


def _plain(value: object) -> object:
    """What orjson cannot write itself: a read-only mapping of tags."""
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"{type(value).__name__} is not a usage record's value")


def _batch_rows(records: Records) -> list[tuple[Any, ...]]:
    """The rows of `usage_batches` for records grouped by their key: the key, the first
    and last times, the count, and the records' own values as one JSON array (what
    each costs is encoding it, in C, rather than the store's binding and storing ten
    values of it). Records of one key further apart than five minutes (a buffer that
    outlasted a store outage) are split by five-minute bucket, so that pruning, which
    goes by a batch's newest record, keeps none for long past `usage_retention`."""
    rows = []
    for key, values in records.items():
        if not values:
            continue
        first, last = min(map(_TS, values)), max(map(_TS, values))
        if last - first <= BUCKET_SECONDS:
            rows.append((*key, first, last, len(values), orjson.dumps(values, default=_plain).decode()))
            continue
        buckets: dict[int, list[RecordValues]] = {}
        for one in values:
            buckets.setdefault(bucket_of(one[0]), []).append(one)
        for part in buckets.values():
            rows.extend(_batch_rows({key: part}))
    return rows


def _unpacked(batch: Sequence[Any], since: float) -> list[dict[str, Any]]:
    """The records of a `usage_batches` row (as `_BATCH_COLUMNS`) from `since` on, as
    `records` gives them."""
    key = dict(zip(_KEY_COLUMNS, batch[:RECORD_KEY_SIZE], strict=True))
    key["stream"] = bool(key["stream"])
    out = []
    for values in orjson.loads(batch[-1]):
        record = dict(zip(RECORD_FIELDS, values, strict=True))
        if record["ts"] < since:
            continue
        for name in ("ts", "queue_s", "duration_s"):
            record[name] = float(record[name])  # PostgreSQL's JSON writes 5.0 as 5
        if record["ttft_s"] is not None:
            record["ttft_s"] = float(record["ttft_s"])
        record["tags"] = record["tags"] or {}
        out.append(key | record)
    return out


RECORDS_PAGE = 200
"""Batches read at a time when looking for the newest records."""


_SUM_KEYS = ("bucket", "org_id", "team_id", "project_id", "user_id", "key_id", "model")


def _add_sums_sql(paramstyle: str) -> str:
    """The sums' upsert in the driver's parameter style (SQLite and PostgreSQL spell
    ON CONFLICT alike); raw for the same reason as the records' INSERT."""
    columns = (*_SUM_KEYS, *_SUM_FIELDS)
    if paramstyle == "qmark":
        marks = ", ".join("?" for _ in columns)
    else:
        marks = ", ".join(f"${i}" for i in range(1, len(columns) + 1))
    updates = ", ".join(f"{name} = usage_sums.{name} + excluded.{name}" for name in _SUM_FIELDS)
    return (
        f"INSERT INTO usage_sums ({', '.join(columns)}) VALUES ({marks}) "
        f"ON CONFLICT ({', '.join(_SUM_KEYS)}) DO UPDATE SET {updates}"
    )


def _add_spend_sql(paramstyle: str) -> str:
    """The spend ledger's upsert in the driver's parameter style. Raw too: building and
    compiling SQLAlchemy's ON CONFLICT construct cost more per batch than the write."""
    marks = "?, ?, ?, ?" if paramstyle == "qmark" else "$1, $2, $3, $4"
    return (
        f"INSERT INTO spend (scope, period, period_start, cost_micros) VALUES ({marks}) "
        "ON CONFLICT (scope, period, period_start) "
        "DO UPDATE SET cost_micros = spend.cost_micros + excluded.cost_micros"
    )


class UsageRepo:
    """Writes and reads of usage."""

    def __init__(self, engine: AsyncEngine, sqlite: SqliteWorker | None = None) -> None:
        self._engine = engine
        self._sqlite = sqlite
        """A SQLite file's writer thread, which takes each batch whole (None: the engine)."""
        self._add_batch = _insert_batch_sql(engine.dialect.paramstyle)
        self._add_sums = _add_sums_sql(engine.dialect.paramstyle)
        self._add_spend = _add_spend_sql(engine.dialect.paramstyle)
        self._postgres = engine.dialect.name == "postgresql"

    async def write_batch(self, records: Records, sums: Sums, spend: SpendDeltas) -> None:
        """Records, their five-minute sums (`five_minute_sums` of them, or gathered as
        they were made) and their spend, in one transaction."""
        if not records:
            return
        # Sorted, so concurrent writers lock the same rows in the same order.
        sum_rows = sorted((*key, *values) for key, values in sums.items())
        deltas = sorted((scope, period, start, cost) for (scope, period, start), cost in spend.items())
        if self._sqlite is not None:
            # The whole transaction in one call on the writer's thread: one hop to it a
            # batch, where the engine makes one a statement (SqliteWorker).
            await self._sqlite.transaction(functools.partial(self._write_sqlite, records, sum_rows, deltas))
            return
        async with transaction(self._engine) as conn:
            if self._postgres:
                # Usage may lose its last fraction of a second to a server crash; not
                # waiting for the WAL flush at every batch is worth that.
                await conn.exec_driver_sql("SET LOCAL synchronous_commit TO OFF")
            await conn.exec_driver_sql(self._add_batch, _batch_rows(records))
            await conn.exec_driver_sql(self._add_sums, sum_rows)
            if deltas:
                await conn.exec_driver_sql(self._add_spend, deltas)

    def _write_sqlite(
        self,
        records: Records,
        sum_rows: list[tuple[Any, ...]],
        deltas: list[tuple[str, str, int, int]],
        conn: sqlite3.Connection,
    ) -> None:
        """`write_batch`'s statements on the writer's thread, inside its transaction."""
        conn.executemany(self._add_batch, _batch_rows(records))
        conn.executemany(self._add_sums, sum_rows)
        if deltas:
            conn.executemany(self._add_spend, deltas)

    async def spend_totals(self, period_starts: Mapping[str, int]) -> dict[tuple[str, str, int], int]:
        """Spend per scope in the periods starting at the given times ({"day": t, ...})."""
        if self._sqlite is not None:  # asked every second: one hop to the writer's thread
            return await self._sqlite.transaction(functools.partial(_spend_totals_sqlite, period_starts))
        table = schema.spend
        clauses = [
            sa.and_(table.c.period == period, table.c.period_start == start)
            for period, start in period_starts.items()
        ]
        async with transaction(self._engine) as conn:
            result = await conn.execute(
                sa.select(table.c.scope, table.c.period, table.c.period_start, table.c.cost_micros).where(
                    sa.or_(*clauses)
                )
            )
            return {(s, p, int(start)): int(cost) for s, p, start, cost in result}

    async def prune(self, before: float) -> int:
        """Deletes the batches of records whose newest is older than `before` (a record
        older than that stays until the rest of its batch is too); returns how many
        records."""
        table = schema.usage_batches
        old = table.c.last_ts < before
        async with transaction(self._engine) as conn:
            count = await conn.scalar(
                sa.select(sa.func.coalesce(sa.func.sum(table.c.record_count), 0)).where(old)
            )
            await conn.execute(table.delete().where(old))
            return int(count or 0)

    async def totals(self, by: str, since: float) -> list[UsageTotal]:
        """Sums from `since` on, grouped by one of `GROUPS`, largest cost first."""
        column = schema.usage_sums.c[GROUPS[by]]
        table = schema.usage_sums
        query = (
            sa.select(column, *(sa.func.sum(table.c[name]) for name in _SUM_FIELDS))
            .where(table.c.bucket >= bucket_of(since))
            .group_by(column)
            .order_by(sa.func.sum(table.c.cost_micros).desc(), column)
        )
        async with transaction(self._engine) as conn:
            result = await conn.execute(query)
            return [UsageTotal(str(group), *(int(v or 0) for v in values)) for group, *values in result]

    async def records(
        self, *, limit: int, since: float = 0.0, key_id: str | None = None
    ) -> list[dict[str, Any]]:
        """The newest records from `since` on (of one key, when given), most recent
        first, at most `limit` (what `GET /api/usage/records` answers)."""
        table = schema.usage_batches
        query = sa.select(*(table.c[name] for name in _BATCH_COLUMNS)).where(table.c.last_ts >= since)
        if key_id is not None:
            query = query.where(table.c.key_id == key_id)
        query = query.order_by(table.c.last_ts.desc(), table.c.id.desc())
        found: list[dict[str, Any]] = []
        async with transaction(self._engine) as conn:
            offset = 0
            while True:
                page = (await conn.execute(query.limit(RECORDS_PAGE).offset(offset))).all()
                for batch in page:
                    found.extend(_unpacked(batch, since))
                found.sort(key=_newest, reverse=True)
                del found[limit:]
                # Batches come newest last record first: once `limit` are found and the
                # next batches all end before the oldest of them, none has a newer one.
                if len(page) < RECORDS_PAGE or (len(found) == limit and found[-1]["ts"] >= page[-1].last_ts):
                    return found
                offset += len(page)

    async def count_records(self) -> int:
        table = schema.usage_batches
        async with transaction(self._engine) as conn:
            result = await conn.scalar(sa.select(sa.func.coalesce(sa.func.sum(table.c.record_count), 0)))
            return int(result or 0)


def _spend_totals_sqlite(
    period_starts: Mapping[str, int], conn: sqlite3.Connection
) -> dict[tuple[str, str, int], int]:
    """`UsageRepo.spend_totals` on the SQLite writer's connection."""
    if not period_starts:
        return {}
    where = " OR ".join("(period = ? AND period_start = ?)" for _ in period_starts)
    rows = conn.execute(
        f"SELECT scope, period, period_start, cost_micros FROM spend WHERE {where}",
        [value for pair in period_starts.items() for value in pair],
    )
    return {(s, p, int(start)): int(cost) for s, p, start, cost in rows}


def _newest(record: dict[str, Any]) -> float:
    return float(record["ts"])
