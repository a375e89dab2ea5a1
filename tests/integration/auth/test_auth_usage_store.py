"""Usage records as the store keeps them (a batch to a row), on SQLite and PostgreSQL:
every value comes back as written, through `records` and through the `usage_records`
view; the newest are found across many batches of overlapping times; pruning deletes
whole batches and says how many records went."""

from __future__ import annotations

import asyncio
import random

import sqlalchemy as sa
from auth_store_helpers import opened

from llmgw.store import Store, UsageRow
from llmgw.store.usage import RECORDS_PAGE, five_minute_sums, group_rows

NOW = 1_800_000_000.0
ROW = UsageRow("k1", None, "p", "t", "o", "m1", 200, True, NOW, "", "r1", 10, 5, 7, 0.0, 0.1, 0.5, None)


async def write(store: Store, rows: list[UsageRow]) -> None:
    await store.usage.write_batch(group_rows(rows), five_minute_sums(rows), {})


def mixed() -> list[UsageRow]:
    """Records of two callers, two models, streamed or not, with and without a time to
    first token and tags, and a long run of one caller."""
    personal = ("k2", "u1", None, None, None)
    rows = [ROW._replace(ts=NOW + i, request_id=f"a-{i}", cost_micros=i) for i in range(300)]
    for i in range(30):
        streamed = i % 2 == 0
        rows.append(
            UsageRow(
                *personal,
                model="m2" if i % 3 else "m1",
                status=429 if i % 5 == 0 else 200,
                stream=streamed,
                ts=NOW + i + 0.5,
                request_id=f"b-{i}",
                replica="r2",
                prompt_tokens=i,
                completion_tokens=2 * i,
                cost_micros=3 * i,
                queue_s=0.25,
                ttft_s=0.01 * i if streamed else None,
                duration_s=1.5,
                tags={"run": f"n{i}", "lane": "é"} if i % 4 == 0 else None,
            )
        )
    return rows


def expected(row: UsageRow) -> dict[str, object]:
    record = row._asdict()
    record["tags"] = dict(row.tags) if row.tags else {}
    return record


def test_every_value_of_a_mixed_batch_comes_back_as_written(store_location: str) -> None:
    rows = mixed()

    async def scenario() -> None:
        async with opened(store_location) as store:
            await write(store, rows)
            back = await store.usage.records(limit=len(rows) + 1)
            assert await store.usage.count_records() == len(rows)
            async with store.engine.connect() as conn:
                viewed = (await conn.execute(sa.text("SELECT * FROM usage_records"))).mappings().all()
        assert len(back) == len(rows)
        assert [r["ts"] for r in back] == sorted((r.ts for r in rows), reverse=True)
        by_id = {record["request_id"]: record for record in back}
        for row in rows:
            assert by_id[row.request_id] == expected(row)
        # The view: a record to a row, its columns as the table had them.
        assert len(viewed) == len(rows)
        view_by_id = {item["request_id"]: item for item in viewed}
        for row in rows:
            item = dict(view_by_id[row.request_id])
            assert bool(item.pop("stream")) == row.stream
            assert (item.pop("tags") is None) == (row.tags is None)
            assert {name: item[name] for name in expected(row) if name in item} == {
                name: value for name, value in row._asdict().items() if name not in ("stream", "tags")
            }

    asyncio.run(scenario())


def test_the_newest_records_are_found_across_many_batches(store_location: str) -> None:
    """More batches than a page, written out of time order, two keys: `records` answers
    what sorting every record would."""
    shuffle = random.Random(3)
    batches: list[list[UsageRow]] = []
    for b in range(RECORDS_PAGE + 40):
        start = NOW + shuffle.uniform(0, 1000)
        key = "k1" if b % 3 else "k2"
        batches.append(
            [
                ROW._replace(key_id=key, ts=start + shuffle.uniform(0, 30), request_id=f"{b}-{i}")
                for i in range(shuffle.randint(1, 4))
            ]
        )
    every = [row for batch in batches for row in batch]

    async def scenario() -> None:
        async with opened(store_location) as store:
            for batch in batches:
                await write(store, batch)
            for limit, since, key in ((10, 0.0, None), (50, NOW + 500, None), (700, NOW + 200, "k2")):
                got = await store.usage.records(limit=limit, since=since, key_id=key)
                want = sorted(
                    (r for r in every if r.ts >= since and (key is None or r.key_id == key)),
                    key=lambda r: r.ts,
                    reverse=True,
                )[:limit]
                assert [r["request_id"] for r in got] == [r.request_id for r in want]

    asyncio.run(scenario())


def test_pruning_deletes_whole_batches_older_than_the_cut(store_location: str) -> None:
    async def scenario() -> None:
        async with opened(store_location) as store:
            await write(store, [ROW._replace(ts=NOW + i, request_id=f"old-{i}") for i in range(5)])
            await write(store, [ROW._replace(ts=NOW + 90 + i, request_id=f"new-{i}") for i in range(20)])
            # The second batch began before the cut and ends after it: kept whole.
            assert await store.usage.prune(NOW + 100) == 5
            assert await store.usage.count_records() == 20
            assert await store.usage.prune(NOW + 100) == 0
            assert [r["request_id"] for r in await store.usage.records(limit=3)] == [
                "new-19",
                "new-18",
                "new-17",
            ]
            # Records of one key hours apart in one write (a buffer that outlasted an
            # outage) are kept by five minutes, not held back by the newest of them.
            await write(store, [ROW._replace(ts=NOW + 3600 * i, request_id=f"hour-{i}") for i in range(4)])
            assert await store.usage.prune(NOW + 3 * 3600) == 20 + 3
            assert [r["request_id"] for r in await store.usage.records(limit=9)] == ["hour-3"]

    asyncio.run(scenario())
