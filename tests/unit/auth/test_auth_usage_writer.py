"""The usage buffer: bounded, never blocking, written in batches of whole chunks, a
refused batch put back; the spend budgets already counted moves from unwritten to
known once written."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

import pytest

from llmgw.auth.budgets import BudgetLedger, SpendKey, day_of, spread_spend
from llmgw.auth.usage import UsageChunk, UsageWriter
from llmgw.errors import StoreUnavailable
from llmgw.store.rows import Records, UsageRow
from llmgw.store.usage import Sums, five_minute_sums, group_rows

NOW = 1_800_000_000.0
DAY_START = int(NOW // 86_400) * 86_400


class Repo:
    """A usage repository that writes to a list, or refuses while `down`."""

    def __init__(self) -> None:
        self.batches: list[int] = []
        self.requests = 0
        self.spend: dict[SpendKey, int] = {}
        self.down = False

    async def write_batch(self, records: Records, sums: Sums, spend: Mapping[SpendKey, int]) -> None:
        if self.down:
            raise StoreUnavailable("down")
        self.batches.append(sum(map(len, records.values())))
        self.requests += sum(values[0] for values in sums.values())
        for key, cost in spend.items():
            self.spend[key] = self.spend.get(key, 0) + cost


def row(i: int, cost: int = 0) -> UsageRow:
    return UsageRow(
        "k", None, "p", "t", "o", "m", 200, False, NOW, f"r{i}", "rep", 1, 1, cost, 0.0, None, 0.1, None
    )


def chunk(rows: list[UsageRow], scopes: tuple[str, ...] = (), *, charged: bool = True) -> UsageChunk:
    """Records as the gate hands them over: with their sums and spend."""
    total = sum(r.cost_micros for r in rows)
    spend = spread_spend({(scopes, day_of(NOW)): total}) if scopes and total else {}
    return UsageChunk(group_rows(rows), five_minute_sums(rows), spend, spend if charged else {})


def writer(repo: Repo, ledger: BudgetLedger, buffer_size: int = 10) -> UsageWriter:
    return UsageWriter(repo, ledger, batch_size=4, buffer_size=buffer_size, flush_interval=0.01)  # type: ignore[arg-type]


def test_a_chunk_without_room_is_dropped_whole_and_counted() -> None:
    w = writer(Repo(), BudgetLedger())
    kept = [w.offer(chunk([row(3 * i), row(3 * i + 1), row(3 * i + 2)])) for i in range(5)]
    assert kept == [True, True, True, False, False]  # 9 of 10 places taken: no room for 3 more
    assert (w.buffered, w.counts.dropped) == (9, 6)
    assert w.offer(chunk([row(99)]))  # one still fits
    assert w.buffered == 10


def test_batches_take_whole_chunks_and_spend_moves_to_known() -> None:
    async def scenario() -> None:
        repo, ledger = Repo(), BudgetLedger()
        w = writer(repo, ledger, buffer_size=20)
        for sizes in ([0, 1], [2, 3, 4], [5], [6, 7, 8, 9, 10]):
            c = chunk([row(i, cost=3) for i in sizes], ("team:t",))
            ledger.charge(c.charged)  # as the gate does before offering
            w.offer(c)
        while await w.flush():
            pass
        # Whole chunks until a batch holds 4 or more: 2 + 3, then 1 + 5.
        assert repo.batches == [5, 6]
        assert (w.counts.written, repo.requests) == (11, 11)
        assert repo.spend[("team:t", "day", DAY_START)] == 33
        assert ledger.spent("team:t", "month", NOW) == 33  # known now, not counted twice

    asyncio.run(scenario())


def test_a_refused_batch_goes_back_and_is_written_later() -> None:
    async def scenario() -> None:
        repo, ledger = Repo(), BudgetLedger()
        w = writer(repo, ledger)
        for i in range(3):
            w.offer(chunk([row(2 * i), row(2 * i + 1)]))
        repo.down = True
        task = asyncio.create_task(w.run())
        for _ in range(200):
            if w.counts.failures:
                break
            await asyncio.sleep(0.01)
        assert w.counts.failures >= 1
        assert w.buffered == 6
        repo.down = False
        for _ in range(500):
            if w.counts.written == 6:
                break
            await asyncio.sleep(0.01)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert w.counts.written == 6
        assert w.counts.dropped == 0
        # The chunks went back as they were offered: the failed batch had merged their
        # records (all of one caller and model) into one list, not into the first chunk's.
        assert sum(repo.batches) == 6

    asyncio.run(scenario())


def test_a_batch_mixing_charged_and_uncharged_chunks_moves_only_the_charged_spend() -> None:
    async def scenario() -> None:
        repo, ledger = Repo(), BudgetLedger()
        w = writer(repo, ledger)
        for i in range(4):
            c = chunk([row(i, cost=10)], ("team:t",), charged=i % 2 == 0)
            ledger.charge(c.charged)
            w.offer(c)
        assert ledger.spent("team:t", "day", NOW) == 20
        await w.flush()
        assert repo.spend[("team:t", "day", DAY_START)] == 40
        # The charged half moves from unwritten to known, not counted twice; the rest is
        # the store's, for the next pull to bring.
        assert ledger.spent("team:t", "day", NOW) == 20

    asyncio.run(scenario())


def test_an_outage_under_traffic_keeps_its_backoff_and_is_logged_once_each_way(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Hand-overs keep filling the buffer while the store is down: each fills a batch,
    which used to cut the backoff short, so the writer retried at the hand-overs' pace
    and logged every retry."""

    async def scenario() -> None:
        repo, ledger = Repo(), BudgetLedger()
        w = writer(repo, ledger, buffer_size=10_000)
        repo.down = True
        task = asyncio.create_task(w.run())
        handovers = 300
        for i in range(handovers):  # at least 0.6 s of hand-overs, each a full batch
            w.offer(chunk([row(4 * i + j) for j in range(4)]))
            await asyncio.sleep(0.002)
        # Backoff from 10 ms, doubling: a few tries in the time 300 hand-overs take, not 300.
        assert 1 <= w.counts.failures <= 12, w.counts.failures
        repo.down = False
        for _ in range(1000):
            if w.counts.written == 4 * handovers:
                break
            await asyncio.sleep(0.01)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert w.counts.written == 4 * handovers

    with caplog.at_level(logging.WARNING, logger="llmgw.auth.usage"):
        asyncio.run(scenario())
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2, messages
    assert messages[0].startswith("usage store refuses writes")
    assert "1200 records written, 0 dropped during the outage" in messages[1]
