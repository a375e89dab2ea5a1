"""The usage buffer: bounded, never blocking, written in batches, a refused batch put
back; spend charged for budgets either way."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence

from llmgw.auth.budgets import BudgetLedger
from llmgw.auth.usage import UsageWriter, cost_micros
from llmgw.config.auth import Price
from llmgw.errors import StoreUnavailable
from llmgw.store.rows import UsageRow

NOW = 1_800_000_000.0


class Repo:
    """A usage repository that writes to a list, or refuses while `down`."""

    def __init__(self) -> None:
        self.batches: list[int] = []
        self.spend: dict[tuple[str, str, int], int] = {}
        self.down = False

    async def write_batch(self, rows: Sequence[UsageRow], spend: Mapping[tuple[str, str, int], int]) -> None:
        if self.down:
            raise StoreUnavailable("down")
        self.batches.append(len(rows))
        for key, cost in spend.items():
            self.spend[key] = self.spend.get(key, 0) + cost


def row(i: int, cost: int = 0) -> UsageRow:
    return UsageRow(NOW, f"r{i}", "m", "rep", 200, False, 1, 1, cost, 0.0, 0.1)


def writer(repo: Repo, ledger: BudgetLedger, buffer_size: int = 10) -> UsageWriter:
    return UsageWriter(repo, ledger, batch_size=4, buffer_size=buffer_size, flush_interval=0.01)  # type: ignore[arg-type]


def test_overflow_is_dropped_and_counted_without_waiting() -> None:
    repo, ledger = Repo(), BudgetLedger()
    w = writer(repo, ledger)
    started = time.perf_counter()
    kept = [w.offer(row(i, cost=5), ("project:p",)) for i in range(25)]
    assert time.perf_counter() - started < 0.05
    assert kept.count(True) == 10
    assert w.counts.dropped == 15
    # Budgets still see the spend of dropped records.
    assert ledger.spent("project:p", "day", NOW) == 125


def test_batches_of_batch_size_and_spend_moves_to_known() -> None:
    async def scenario() -> None:
        repo, ledger = Repo(), BudgetLedger()
        w = writer(repo, ledger)
        for i in range(10):
            w.offer(row(i, cost=3), ("team:t",))
        while await w.flush():
            pass
        assert repo.batches == [4, 4, 2]
        assert w.counts.written == 10
        assert repo.spend[("team:t", "day", int(NOW // 86400) * 86400)] == 30
        assert ledger.spent("team:t", "month", NOW) == 30

    asyncio.run(scenario())


def test_a_refused_batch_goes_back_and_is_written_later() -> None:
    async def scenario() -> None:
        repo, ledger = Repo(), BudgetLedger()
        w = writer(repo, ledger)
        for i in range(6):
            w.offer(row(i), ())
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

    asyncio.run(scenario())


def test_cost_is_per_thousand_tokens() -> None:
    assert cost_micros(Price(prompt_per_1k=1000, completion_per_1k=2000), 1500, 500) == 2500


def test_a_batch_mixing_charged_and_uncharged_records_moves_only_the_charged_spend() -> None:
    async def scenario() -> None:
        repo, ledger = Repo(), BudgetLedger()
        w = writer(repo, ledger)
        for i in range(4):
            w.offer(row(i, cost=10), ("team:t",), charge=i % 2 == 0)
        assert ledger.spent("team:t", "day", NOW) == 20
        await w.flush()
        assert repo.spend[("team:t", "day", int(NOW // 86_400) * 86_400)] == 40
        # The charged half moves from unwritten to known, not counted twice; the rest is
        # the store's, for the next pull to bring.
        assert ledger.spent("team:t", "day", NOW) == 20

    asyncio.run(scenario())
