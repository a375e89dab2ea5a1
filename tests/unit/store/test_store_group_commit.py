"""Group commit (llmgw.store.group_commit): writes that arrive together share one
transaction, one refused item fails alone, a failed transaction is retried item by
item, and a bug reaches every caller of its batch instead of leaving them waiting."""

from __future__ import annotations

import asyncio

import pytest

from llmgw.errors import StoreConflict, StoreError, StoreUnavailable
from llmgw.store.group_commit import GroupCommit


class Store:
    """A stand-in for the transaction: records each batch, refuses odd items, and fails
    whole batches while `broken`."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.broken = 0

    async def run(self, items: list[int]) -> list[str | StoreError]:
        self.batches.append(list(items))
        await asyncio.sleep(0)  # the commit: others arrive meanwhile
        if self.broken and len(items) > 1:
            self.broken -= 1
            raise StoreUnavailable("the batch's transaction failed")
        return [StoreConflict(f"{i} is taken") if i % 2 else f"made {i}" for i in items]


def test_writes_that_arrive_together_share_a_transaction() -> None:
    store = Store()
    commit: GroupCommit[int, str] = GroupCommit(store.run)

    async def run() -> list[str | BaseException]:
        return await asyncio.gather(*(commit.submit(i) for i in range(6)), return_exceptions=True)

    outcomes = asyncio.run(run())
    assert store.batches == [[0, 1, 2, 3, 4, 5]]
    assert outcomes[0::2] == ["made 0", "made 2", "made 4"]
    assert all(isinstance(refused, StoreConflict) for refused in outcomes[1::2])


def test_a_write_alone_is_not_held_for_company_and_later_ones_form_the_next_batch() -> None:
    store = Store()
    commit: GroupCommit[int, str] = GroupCommit(store.run)

    async def run() -> None:
        assert await commit.submit(0) == "made 0"
        first = asyncio.ensure_future(commit.submit(2))
        await asyncio.sleep(0)  # the first batch has started with one item
        later = [asyncio.ensure_future(commit.submit(i)) for i in (4, 6)]
        assert [await first, *[await x for x in later]] == ["made 2", "made 4", "made 6"]

    asyncio.run(run())
    assert store.batches == [[0], [2], [4, 6]]


def test_a_failed_transaction_is_run_again_item_by_item() -> None:
    store = Store()
    store.broken = 1
    commit: GroupCommit[int, str] = GroupCommit(store.run)

    async def run() -> list[str | BaseException]:
        return await asyncio.gather(*(commit.submit(i) for i in (0, 1, 2)), return_exceptions=True)

    outcomes = asyncio.run(run())
    assert store.batches == [[0, 1, 2], [0], [1], [2]]
    assert outcomes[0] == "made 0"
    assert isinstance(outcomes[1], StoreConflict)
    assert outcomes[2] == "made 2"


def test_a_bug_in_the_batch_reaches_its_callers() -> None:
    async def broken(items: list[int]) -> list[str | StoreError]:
        raise KeyError("a bug")

    commit: GroupCommit[int, str] = GroupCommit(broken)

    async def run() -> None:
        with pytest.raises(KeyError):
            await asyncio.wait_for(commit.submit(1), timeout=30)

    asyncio.run(run())
