"""Usage in the store: per-request records, their five-minute sums, and the budgets'
spend ledger, all written by one transaction per batch so they never disagree.

Pruning (`usage_retention`) deletes records only; sums and spend are what totals and
budgets read, and stay.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from itertools import chain
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from llmgw.store import schema
from llmgw.store.engine import SqliteWorker, sqlite_file, transaction
from llmgw.store.rows import (
    NO_TAGS_TEXT,
    NO_TTFT,
    RECORD_KEY_SIZE,
    Records,
    RecordValues,
    UsageRow,
    UsageTotal,
)

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
    """Whole records grouped as `write_batch` takes them (None as `NO_TTFT`, `NO_TAGS_TEXT`)."""
    records: Records = {}
    for row in rows:
        values: RecordValues = (
            row.ts,
            row.request_id,
            row.replica,
            row.prompt_tokens,
            row.completion_tokens,
            row.cost_micros,
            row.queue_s,
            NO_TTFT if row.ttft_s is None else row.ttft_s,
            row.duration_s,
            NO_TAGS_TEXT if row.tags is None else row.tags,
        )
        records.setdefault(row[:RECORD_KEY_SIZE], []).append(values)
    return records


_RECORD_COLUMNS = UsageRow._fields
_KEY_COLUMNS = _RECORD_COLUMNS[:RECORD_KEY_SIZE]
_VALUE_COLUMNS = _RECORD_COLUMNS[RECORD_KEY_SIZE:]
_NONE_AS = {"ttft_s": (repr(NO_TTFT), "double precision"), "tags": (repr(NO_TAGS_TEXT), "text")}
"""The columns whose "none" a record holds as a value of their own type (rows.NO_TTFT),
with that type as PostgreSQL names it."""


def _stored(column: str, placeholder: str, *, typed: bool = False) -> str:
    """What an INSERT stores in `column` from the parameter `placeholder` (cast to the
    column's type where `typed`, for PostgreSQL, which must know a parameter's type)."""
    none = _NONE_AS.get(column)
    if none is None:
        return placeholder
    value, type_name = none
    return f"NULLIF({placeholder}::{type_name}, {value})" if typed else f"NULLIF({placeholder}, {value})"


_POSTGRES_INSERT_RECORD = (
    f"INSERT INTO usage_records ({', '.join(_RECORD_COLUMNS)}) "
    f"VALUES ({', '.join(_stored(c, f'${i}', typed=True) for i, c in enumerate(_RECORD_COLUMNS, 1))})"
)
"""PostgreSQL's INSERT of one record (asyncpg's executemany pipelines a batch of them).
Records are the one write per request, so they skip SQLAlchemy's per-row parameter
processing, which cost more than the database's own work (bench/auth/usage_writes.py)."""


def _power_of_two_to(n: int) -> int:
    """The largest power of two not over `n` (at least 1)."""
    return 1 << (n.bit_length() - 1)


_SQLITE_MAX_PARAMETERS = 32_766 if sqlite3.sqlite_version_info >= (3, 32) else 999
SQLITE_ROWS_PER_INSERT = _power_of_two_to(
    min(256, (_SQLITE_MAX_PARAMETERS - len(_KEY_COLUMNS)) // len(_VALUE_COLUMNS))
)
"""Records per INSERT statement on SQLite at most: a power of two within its limit of
parameters a statement (256 where that is 32,766)."""


@functools.cache
def _insert_shared_sql(rows: int) -> str:
    """SQLite's INSERT of `rows` records of one `RecordKey`: its values bound once, the
    rest per record in a VALUES list (whose columns SQLite names column1, …).

    Many records a statement: the sqlite3 module lets go of the GIL around every
    statement step, so an executemany of a batch hands the interpreter back and forth
    with the request path once per record, and one statement of many rows does it
    once (3.9 against 6.1 µs a record, through the gateway's store layer). The shared
    values once a statement rather than once a record: binding a value through the
    sqlite3 module costs about as much as SQLite's storing it (19,400 against 12,200
    instructions a record of the router benchmark's, in isolation)."""
    select = ", ".join(
        ["?"] * len(_KEY_COLUMNS) + [_stored(c, f"column{i}") for i, c in enumerate(_VALUE_COLUMNS, 1)]
    )
    values = ", ".join(["(" + ", ".join("?" for _ in _VALUE_COLUMNS) + ")"] * rows)
    return f"INSERT INTO usage_records ({', '.join(_RECORD_COLUMNS)}) SELECT {select} FROM (VALUES {values})"


def _sqlite_inserts(records: Records) -> Iterator[tuple[str, tuple[Any, ...]]]:
    """The records' INSERTs on SQLite with their parameters: per `RecordKey` (bound
    first), `SQLITE_ROWS_PER_INSERT` records each, and the rest in statements of fewer,
    each a power of two (300 records: 256, 32, 8 and 4).

    Powers of two because preparing a statement of many rows costs SQLite more than
    running it (3 million instructions for 128 rows, 23,000 a row): with the size of the
    last statement of a batch free, nearly every batch would bring one the sqlite3
    module's cache of 128 statements does not hold. Nine sizes it always holds."""
    for key, values in records.items():
        start, left = 0, len(values)
        while left:
            rows = min(SQLITE_ROWS_PER_INSERT, _power_of_two_to(left))
            part = values[start : start + rows]
            yield _insert_shared_sql(rows), key + tuple(chain.from_iterable(part))
            start += rows
            left -= rows


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

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._add_sums = _add_sums_sql(engine.dialect.paramstyle)
        self._add_spend = _add_spend_sql(engine.dialect.paramstyle)
        self._postgres = engine.dialect.name == "postgresql"
        # An in-memory database cannot be opened twice: it stays on the engine.
        path = sqlite_file(engine.url)
        self._sqlite = SqliteWorker(path) if path is not None else None

    async def close(self) -> None:
        """Closes what the repository holds beside the engine (SQLite's writer)."""
        if self._sqlite is not None:
            await self._sqlite.close()

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
                rows = [key + own for key, values in records.items() for own in values]
                await conn.exec_driver_sql(_POSTGRES_INSERT_RECORD, rows)
            else:
                for sql, values in _sqlite_inserts(records):
                    await conn.exec_driver_sql(sql, values)
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
        for sql, values in _sqlite_inserts(records):
            conn.execute(sql, values)
        conn.executemany(self._add_sums, sum_rows)
        if deltas:
            conn.executemany(self._add_spend, deltas)

    async def spend_totals(self, period_starts: Mapping[str, int]) -> dict[tuple[str, str, int], int]:
        """Spend per scope in the periods starting at the given times ({"day": t, ...})."""
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
        """Deletes records older than `before`; returns how many."""
        table = schema.usage_records
        async with transaction(self._engine) as conn:
            result = await conn.execute(table.delete().where(table.c.ts < before))
            return int(result.rowcount or 0)

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
        """The newest records, most recent first (what `llmgw ctl request` reads)."""
        table = schema.usage_records
        query = table.select().where(table.c.ts >= since).order_by(table.c.ts.desc()).limit(limit)
        if key_id is not None:
            query = query.where(table.c.key_id == key_id)
        async with transaction(self._engine) as conn:
            rows = (await conn.execute(query)).mappings().all()
        out = []
        for row in rows:
            # Column names come back as a str subclass, which orjson will not take as keys.
            item = {str(name): value for name, value in row.items()}
            item["tags"] = orjson.loads(item["tags"]) if item["tags"] else {}
            out.append(item)
        return out

    async def count_records(self) -> int:
        async with transaction(self._engine) as conn:
            result = await conn.execute(sa.select(sa.func.count()).select_from(schema.usage_records))
            return int(result.scalar_one())
