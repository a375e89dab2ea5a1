"""Group commit: writes that arrive while one transaction commits share the next one.

A commit on a SQLite file waits for the disk (an fsync: 10 to 20 ms on a shared virtual
disk), so one transaction per request caps a stream of small writes at a few dozen a
second however fast the rest is. An identity provider provisioning people sends them
from several connections at once; with this, those that arrive together are written in
one transaction and wait for one fsync. A write that arrives alone is started at once,
so nothing waits for a batch to fill.

The batch's work checks each item for what would conflict before writing it, and
refuses it with a `StoreError` without writing anything: that item fails alone and the
others go on in the same transaction. A failure that leaves the transaction unusable
(a conflict no check saw, a store gone) fails the batch's transaction; then every item
of it is run again alone, so each gets its own answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from llmgw.errors import StoreError

T = TypeVar("T")
R = TypeVar("R")


class GroupCommit(Generic[T, R]):
    """Hands the items submitted meanwhile to `run_batch`, which writes them in one
    transaction and returns, in order, each item's result or the `StoreError` it was
    refused with. One per kind of write, made by the repository that owns it."""

    def __init__(
        self, run_batch: Callable[[list[T]], Awaitable[list[R | StoreError]]], max_batch: int = 256
    ) -> None:
        self._run_batch = run_batch
        self._max_batch = max_batch
        self._pending: list[tuple[T, asyncio.Future[R]]] = []
        self._drainer: asyncio.Task[None] | None = None

    async def submit(self, item: T) -> R:
        """The result for `item` once its transaction committed, or its error."""
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._pending.append((item, future))
        if self._drainer is None:
            self._drainer = asyncio.create_task(self._drain(), name="store-group-commit")
        return await future

    async def _drain(self) -> None:
        try:
            while self._pending:
                batch = self._pending[: self._max_batch]
                del self._pending[: self._max_batch]
                try:
                    await self._run(batch)
                except Exception as exc:  # a bug in the work: its callers hear of it, not hang
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(exc)
        finally:
            self._drainer = None

    async def _run(self, batch: list[tuple[T, asyncio.Future[R]]]) -> None:
        try:
            outcomes = await self._run_batch([item for item, _ in batch])
        except StoreError as exc:
            if len(batch) > 1:
                for one in batch:
                    await self._run([one])
                return
            outcomes = [exc]
        for (_, future), outcome in zip(batch, outcomes, strict=True):
            if future.done():  # its caller gave up waiting
                continue
            if isinstance(outcome, StoreError):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)
