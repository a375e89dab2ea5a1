"""Usage batches on a SQLite file, written whole on the usage repository's own thread
and connection: everything of a batch is there, or nothing of it; a refused or
cancelled batch leaves the next one a clean start; closing ends the thread. (What is
written is read back on SQLite and PostgreSQL alike in
tests/integration/auth/test_auth_usage_store.py.)"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from llmgw.errors import StoreConflict, StoreUnavailable
from llmgw.store import Store, UsageRow
from llmgw.store import engine as store_engine
from llmgw.store.usage import five_minute_sums, group_rows

NOW = 1_800_000_000.0
DAY = ("project:p", "day", 1_799_971_200)


ROW = UsageRow("k1", None, "p", "t", "o", "m1", 200, True, NOW, "", "r1", 10, 5, 7, 0.0, 0.1, 0.5, None)


def records(prefix: str, count: int) -> list[UsageRow]:
    """`count` records of project p at 7 micro-units each, the first of them an error."""
    return [
        ROW._replace(ts=NOW + i, request_id=f"{prefix}-{i}", status=503 if i == 0 else 200)
        for i in range(count)
    ]


async def write(
    store: Store, rows: list[UsageRow], spend: dict[tuple[str, str, int], Any] | None = None
) -> None:
    if spend is None:
        spend = {DAY: sum(row.cost_micros for row in rows)}
    await store.usage.write_batch(group_rows(rows), five_minute_sums(rows), spend)


async def contents(store: Store) -> tuple[int, tuple[int, int, int], dict[tuple[str, str, int], int]]:
    """Records, (requests, errors, cost) of the sums, and the spend ledger."""
    totals = await store.usage.totals("project", since=NOW - 600)
    sums = (
        sum(t.requests for t in totals),
        sum(t.errors for t in totals),
        sum(t.cost_micros for t in totals),
    )
    return await store.usage.count_records(), sums, await store.usage.spend_totals({"day": DAY[2]})


def writer_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("llmgw-sqlite")]


@asynccontextmanager
async def write_locked(path: Path) -> AsyncIterator[None]:
    """Another connection holding the database's write lock."""
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        other.execute("ROLLBACK")
        other.close()


def test_a_batch_is_all_there_and_close_ends_the_thread(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = await Store.open(str(tmp_path / "s.db"))
        try:
            rows = records("a", 300)  # of two keys: an error and the rest
            await write(store, rows)
            assert await contents(store) == (300, (300, 1, 2100), {DAY: 2100})
            [newest, *_] = await store.usage.records(limit=1)
            assert (newest["request_id"], newest["stream"], newest["duration_s"]) == ("a-299", True, 0.5)
            assert len(writer_threads()) == 1
        finally:
            await store.close()
        assert writer_threads() == []

    asyncio.run(scenario())


def test_a_refused_batch_leaves_nothing_and_the_next_one_is_written(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = await Store.open(str(tmp_path / "s.db"))
        try:
            await write(store, records("a", 3))
            # The spend row is refused (NOT NULL) after the records and sums went in.
            with pytest.raises(StoreConflict):
                await write(store, records("b", 300), spend={DAY: None})
            assert await contents(store) == (3, (3, 1, 21), {DAY: 21})
            await write(store, records("c", 2))
            assert await contents(store) == (5, (5, 2, 35), {DAY: 35})
        finally:
            await store.close()

    asyncio.run(scenario())


def test_a_write_locked_past_busy_timeout_is_unavailable_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_engine, "SQLITE_BUSY_TIMEOUT_MS", 50)

    async def scenario() -> None:
        store = await Store.open(str(tmp_path / "s.db"))
        try:
            async with write_locked(tmp_path / "s.db"):
                with pytest.raises(StoreUnavailable, match="locked"):
                    await write(store, records("a", 3))
            assert await contents(store) == (0, (0, 0, 0), {})
            await write(store, records("b", 2))
            assert await contents(store) == (2, (2, 1, 14), {DAY: 14})
        finally:
            await store.close()

    asyncio.run(scenario())


def test_a_cancelled_batch_is_not_written_and_the_next_one_is(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = await Store.open(str(tmp_path / "s.db"))
        try:
            async with write_locked(tmp_path / "s.db"):
                # The write waits for the lock (or its turn on the thread) when cancelled;
                # whichever, the caller takes it as not done, so it must not be done.
                task = asyncio.create_task(write(store, records("a", 3)))
                for _ in range(3):
                    await asyncio.sleep(0)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
            await write(store, records("b", 2))
            assert await contents(store) == (2, (2, 1, 14), {DAY: 14})
        finally:
            await store.close()
        assert writer_threads() == []

    asyncio.run(scenario())
