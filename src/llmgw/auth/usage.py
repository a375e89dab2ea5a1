"""Usage accounting off the request path: the event the gateway hands over per answered
request, and the bounded buffer a background task writes to the store in batches.

`record` on the request path only appends to a deque; when the deque holds
`buffer_size` events the new one is dropped and counted, because a store that stalls
must cost accounting, never requests. The writer takes up to `batch_size` events every
`flush_interval` (sooner when a batch is full) and writes the records, their
five-minute sums and their spend in one transaction; a batch the store refused goes
back to the front of the buffer, as far as there is room, and is tried again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from llmgw.auth.budgets import BudgetLedger, SpendKey, aggregate_spend
from llmgw.auth.principal import Principal
from llmgw.config.auth import Price
from llmgw.errors import StoreError
from llmgw.store.rows import UsageRow
from llmgw.store.usage import UsageRepo

log = logging.getLogger(__name__)

MAX_BACKOFF_S = 30.0


class UsageRecordLike(Protocol):
    """What the request path records per request (llmgw.router.usage.UsageRecord)."""

    @property
    def request_id(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def endpoint(self) -> str: ...
    @property
    def status(self) -> int: ...
    @property
    def stream(self) -> bool: ...
    @property
    def started(self) -> float: ...
    @property
    def first_byte(self) -> float | None: ...
    @property
    def finished(self) -> float: ...
    @property
    def account(self) -> AccountLike | None: ...


class AccountLike(Protocol):
    """Who a request is charged to (llmgw.router.usage.Account)."""

    @property
    def principal(self) -> Principal: ...
    @property
    def counted_tokens(self) -> int: ...
    @property
    def tags(self) -> dict[str, str]: ...
    @property
    def queued_s(self) -> float: ...


class TokensLike(Protocol):
    @property
    def prompt(self) -> int: ...
    @property
    def completion(self) -> int: ...


@dataclass(slots=True)
class UsageEvent:
    """One answered (or refused) request, as accounting needs it. Made once per
    request, so a plain (not frozen) dataclass, which is several times cheaper to
    build; treat it as read-only."""

    request_id: str
    model: str
    replica: str
    status: int
    stream: bool
    prompt_tokens: int
    completion_tokens: int
    queue_s: float
    duration_s: float
    ttft_s: float | None
    finished_at: float
    """UNIX time the answer ended."""
    principal: Principal | None
    tags: dict[str, str] = field(default_factory=dict)
    counted_tokens: int = 0
    """The tokens `admit` counted against TPM (`Admission.counted_tokens`); the real
    count replaces them."""

    @classmethod
    def from_record(
        cls,
        record: UsageRecordLike,
        tokens: TokensLike | None,
        *,
        principal: Principal | None,
        tags: dict[str, str] | None = None,
        queue_s: float = 0.0,
        counted_tokens: int = 0,
        finished_at: float | None = None,
    ) -> UsageEvent:
        """An event from the request path's record (its times are on one monotonic
        clock, so only their differences are used)."""
        return cls(
            request_id=record.request_id,
            model=record.model,
            replica=record.endpoint,
            status=record.status,
            stream=record.stream,
            prompt_tokens=tokens.prompt if tokens else 0,
            completion_tokens=tokens.completion if tokens else 0,
            queue_s=queue_s,
            duration_s=max(record.finished - record.started, 0.0),
            ttft_s=None if record.first_byte is None else max(record.first_byte - record.started, 0.0),
            finished_at=time.time() if finished_at is None else finished_at,
            principal=principal,
            # Not copied: the request's own tags, read-only from here on.
            tags=tags if tags is not None else {},
            counted_tokens=counted_tokens,
        )


def usage_events(
    batch: Iterable[tuple[UsageRecordLike, TokensLike | None]], wall_offset: float
) -> list[UsageEvent]:
    """The events of the records in a drained batch that are charged to someone (auth
    on). Their times are on the request path's monotonic clock; `wall_offset` (UNIX
    time minus that clock, read once per batch) turns them into UNIX time."""
    return [
        UsageEvent.from_record(
            record,
            tokens,
            principal=account.principal,
            tags=account.tags,
            queue_s=account.queued_s,
            counted_tokens=account.counted_tokens,
            finished_at=record.finished + wall_offset,
        )
        for record, tokens in batch
        if (account := record.account) is not None
    ]


def cost_micros(price: Price, prompt_tokens: int, completion_tokens: int) -> int:
    """Millionths of a unit: the price is per thousand tokens."""
    return (prompt_tokens * price.prompt_per_1k + completion_tokens * price.completion_per_1k) // 1000


def usage_row(event: UsageEvent, cost: int) -> UsageRow:
    p = event.principal
    return UsageRow(
        ts=event.finished_at,
        request_id=event.request_id,
        model=event.model,
        replica=event.replica,
        status=event.status,
        stream=event.stream,
        prompt_tokens=event.prompt_tokens,
        completion_tokens=event.completion_tokens,
        cost_micros=cost,
        queue_s=event.queue_s,
        duration_s=event.duration_s,
        ttft_s=event.ttft_s,
        key_id=p.key_id if p else None,
        user_id=p.user_id if p else None,
        project_id=p.project_id if p else None,
        team_id=p.team_id if p else None,
        org_id=p.org_id if p else None,
        tags=event.tags,
    )


Queued = tuple[UsageRow, tuple[str, ...], bool]
"""A record waiting, the scopes its cost is charged to, and whether budgets saw it."""


@dataclass(slots=True)
class WriterCounts:
    written: int = 0
    dropped: int = 0
    failures: int = 0
    batches: int = 0


class UsageWriter:
    """The bounded buffer and the task that empties it into the store."""

    def __init__(
        self,
        repo: UsageRepo,
        ledger: BudgetLedger,
        *,
        batch_size: int,
        buffer_size: int,
        flush_interval: float,
        concurrency: int = 1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._repo = repo
        self._ledger = ledger
        self._batch_size = batch_size
        self._buffer_size = buffer_size
        self._flush_interval = flush_interval
        self._concurrency = max(1, concurrency)
        self._clock = clock
        self._buffer: deque[Queued] = deque()
        self._full = asyncio.Event()
        self._writing = 0
        self.counts = WriterCounts()

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    @property
    def pending(self) -> int:
        """Records not yet in the store: waiting, or in a write under way."""
        return len(self._buffer) + self._writing

    async def settle(self, timeout: float) -> None:
        """Waits until nothing is pending (for tests and a clean stop); TimeoutError after
        `timeout` seconds."""
        async with asyncio.timeout(timeout):
            while self.pending:
                if self._buffer:
                    self._full.set()
                await asyncio.sleep(0.005)

    def offer(self, row: UsageRow, scopes: tuple[str, ...], *, charge: bool = True) -> bool:
        """Queues a record, its cost to be added to `scopes`' spend; never blocks. With
        `charge` (the caller has budgets to keep) the cost counts for budgets here at
        once, even when the record cannot be kept. False when it was dropped."""
        charged = charge and row.cost_micros > 0 and bool(scopes)
        if charged:
            self._ledger.charge_request(scopes, row.cost_micros, row.ts)
        return self.offer_many(((row, scopes, charged),)) == 1

    def offer_many(self, items: Sequence[Queued]) -> int:
        """Queues records whose spend the caller has already charged to the ledger where
        their flag says so; never blocks. Returns how many were kept: those past
        `buffer_size` are dropped and counted."""
        room = self._buffer_size - len(self._buffer)
        kept = items if len(items) <= room else items[: max(room, 0)]
        self.counts.dropped += len(items) - len(kept)
        self._buffer.extend(kept)
        if len(self._buffer) >= self._batch_size:
            self._full.set()
        return len(kept)

    async def flush(self) -> int:
        """Writes one batch; returns how many records (0 when empty). On `StoreError`
        (or cancellation) the batch is put back first."""
        if not self._buffer:
            return 0
        batch = [self._buffer.popleft() for _ in range(min(self._batch_size, len(self._buffer)))]
        spend = aggregate_spend((scopes, row.ts, row.cost_micros) for row, scopes, _ in batch)
        charged = self._charged_share(batch, spend)
        self._writing += len(batch)
        try:
            await self._repo.write_batch([row for row, _, _ in batch], spend)
        except BaseException:  # a refused write, or a stop in the middle of one
            self._requeue(batch)
            raise
        finally:
            self._writing -= len(batch)
        self._ledger.written(charged)
        self.counts.written += len(batch)
        self.counts.batches += 1
        return len(batch)

    @staticmethod
    def _charged_share(batch: list[Queued], spend: dict[SpendKey, int]) -> dict[SpendKey, int]:
        """The part of a batch's spend the ledger already counted (`offer` with `charge`).
        Nearly always every record of a batch was charged (budgets everywhere) or none
        was, and then it is all or nothing, without summing the batch a second time."""
        flags = {charged for _, _, charged in batch}
        if flags == {True}:
            return spend
        if True not in flags:
            return {}
        return aggregate_spend((scopes, row.ts, row.cost_micros) for row, scopes, c in batch if c)

    def _requeue(self, batch: list[Queued]) -> None:
        room = max(self._buffer_size - len(self._buffer), 0)
        kept = batch[:room]
        self.counts.dropped += len(batch) - len(kept)
        self._buffer.extendleft(reversed(kept))

    async def run(self) -> None:
        """Writes batches until cancelled; a failing store is retried with backoff."""
        backoff = self._flush_interval
        while True:
            # asyncio.timeout rather than wait_for: 3.11's wait_for can lose a cancellation
            # that arrives as the event is set, leaving a stop waiting for ever.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(backoff):
                    await self._full.wait()
            self._full.clear()
            try:
                await self._write_all()
                backoff = self._flush_interval
            except StoreError as exc:
                self.counts.failures += 1
                backoff = min(max(backoff * 2, self._flush_interval), MAX_BACKOFF_S)
                log.warning("usage records not written, retrying in %.1fs: %s", backoff, exc)

    async def _write_all(self) -> None:
        """Writes batches until fewer than a full one is left; on PostgreSQL several at
        once (`concurrency`), so the server's work on one overlaps the encoding of the
        next."""
        while self._buffer:
            lanes = min(self._concurrency, -(-len(self._buffer) // self._batch_size))
            outcomes = await asyncio.gather(*(self.flush() for _ in range(lanes)), return_exceptions=True)
            written: list[int] = []
            for outcome in outcomes:
                if isinstance(outcome, BaseException):
                    raise outcome
                written.append(outcome)
            if min(written) < self._batch_size:
                return

    async def drain(self, timeout: float) -> None:
        """Writes what is buffered, for a clean stop; gives up after `timeout` seconds."""
        deadline = self._clock() + timeout
        while self._buffer and self._clock() < deadline:
            try:
                async with asyncio.timeout(max(deadline - self._clock(), 0.01)):
                    await self.flush()
            except (StoreError, TimeoutError) as exc:
                log.warning("usage records left unwritten at stop: %s", exc)
                return
