"""Usage accounting off the request path: what the gateway hands over per answered
request, and the bounded buffer a background task writes to the store in batches.

The gate turns each hand-over of finished requests into one `UsageChunk`: the records
(grouped by what they share), and what they add to the five-minute sums and the spend
ledger. Queuing a chunk only
appends it to a deque; when the buffer holds `buffer_size` records a chunk that does
not fit is dropped whole and its records counted, because a store that stalls must cost
accounting, never requests. The writer takes whole chunks, about `batch_size` records,
every `flush_interval` (sooner when a batch is full) and writes the records, their
sums and their spend in one transaction; a batch the store refused goes back to the
front of the buffer, as far as there is room, and is tried again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from llmgw.auth.budgets import BudgetLedger, Reservation, SpendKey
from llmgw.auth.principal import Principal
from llmgw.errors import StoreError
from llmgw.store.rows import Records
from llmgw.store.usage import Sums, UsageRepo, merge_sums

log = logging.getLogger(__name__)

MAX_BACKOFF_S = 30.0
STILL_DOWN_LOG_S = 300.0
"""How often an outage of the store is logged again while it lasts."""


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


AccountLike = tuple[Principal, int, Mapping[str, str], float, Reservation | None]
"""Who a request is charged to (llmgw.router.usage.Account): the caller, the tokens its
TPM was charged at admission, its tags, the seconds it queued and what its budgets hold
for it (None without budgets)."""


class TokensLike(Protocol):
    @property
    def prompt(self) -> int: ...
    @property
    def completion(self) -> int: ...


Finished = tuple[UsageRecordLike, TokensLike | None]
"""A record the gateway's usage sink drained, and the tokens read from its answer."""


@dataclass(slots=True)
class UsageChunk:
    """Records handed over together, with what they add to the five-minute sums and to
    the spend ledger, worked out as the records were made: the writer only merges
    chunks, never walks their records again. Queued, written and dropped whole."""

    records: Records = field(default_factory=dict)
    sums: Sums = field(default_factory=dict)
    spend: dict[SpendKey, int] = field(default_factory=dict)
    charged: dict[SpendKey, int] = field(default_factory=dict)
    """The part of `spend` this gateway's ledger already counts (payers with budgets)."""
    size: int = -1
    """How many records (counted at construction when not given)."""

    def __post_init__(self) -> None:
        if self.size < 0:
            self.size = sum(map(len, self.records.values()))

    def merge(self, other: UsageChunk) -> None:
        """Adds another chunk's records and sums, copying the lists it adds to, so a
        chunk put back after a failed write is as it was."""
        records = self.records
        for key, values in other.records.items():
            kept = records.get(key)
            if kept is None:
                records[key] = values.copy()
            else:
                kept.extend(values)
        self.size += other.size
        merge_sums(self.sums, other.sums)
        for target, more in ((self.spend, other.spend), (self.charged, other.charged)):
            for spend_key, cost in more.items():
                target[spend_key] = target.get(spend_key, 0) + cost


@dataclass(slots=True)
class WriterCounts:
    written: int = 0
    dropped: int = 0
    failures: int = 0
    batches: int = 0


@dataclass(slots=True)
class Outage:
    """A spell of refused writes: when it began and was last logged (the writer's clock),
    and the counts then, so its end can say what it cost."""

    began: float
    reported: float
    written: int
    dropped: int


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
        self._buffer: deque[UsageChunk] = deque()
        self._buffered = 0  # records in the buffer's chunks
        self._full = asyncio.Event()
        self._writing = 0
        self.counts = WriterCounts()

    @property
    def buffered(self) -> int:
        return self._buffered

    @property
    def pending(self) -> int:
        """Records not yet in the store: waiting, or in a write under way."""
        return self._buffered + self._writing

    async def settle(self, timeout: float) -> None:
        """Waits until nothing is pending (for tests and a clean stop); TimeoutError after
        `timeout` seconds."""
        async with asyncio.timeout(timeout):
            while self.pending:
                if self._buffer:
                    self._full.set()
                await asyncio.sleep(0.005)

    def offer(self, chunk: UsageChunk) -> bool:
        """Queues a chunk whose spend the caller has already charged to the ledger as its
        `charged` says; never blocks. A chunk with no room left for all of its records
        is dropped whole and its records counted: False."""
        size = chunk.size
        if not size:
            return True
        if self._buffered + size > self._buffer_size:
            self.counts.dropped += size
            return False
        self._buffer.append(chunk)
        self._buffered += size
        if self._buffered >= self._batch_size:
            self._full.set()
        return True

    async def flush(self) -> int:
        """Writes one batch: whole chunks, until it holds `batch_size` records or more
        (a write costs the store a round of statements whatever its size, so a batch
        is not cut short of the size asked for); returns how many records (0 when
        empty). On `StoreError` (or cancellation) the chunks are put back first."""
        if not self._buffer:
            return 0
        taken = [self._buffer.popleft()]
        size = taken[0].size
        while self._buffer and size < self._batch_size:
            chunk = self._buffer.popleft()
            taken.append(chunk)
            size += chunk.size
        self._buffered -= size
        batch = UsageChunk(size=0)
        for chunk in taken:
            batch.merge(chunk)
        self._writing += size
        try:
            await self._repo.write_batch(batch.records, batch.sums, batch.spend)
        except BaseException:  # a refused write, or a stop in the middle of one
            self._requeue(taken)
            raise
        finally:
            self._writing -= size
        self._ledger.written(batch.charged)
        self.counts.written += size
        self.counts.batches += 1
        return size

    def _requeue(self, chunks: list[UsageChunk]) -> None:
        """Puts chunks back at the front, as far as the buffer has room for them whole."""
        room = self._buffer_size - self._buffered
        kept: list[UsageChunk] = []
        for chunk in chunks:
            size = chunk.size
            if size <= room:
                kept.append(chunk)
                room -= size
                self._buffered += size
            else:
                self.counts.dropped += size
        self._buffer.extendleft(reversed(kept))

    async def run(self) -> None:
        """Writes batches until cancelled; a failing store is retried with backoff.

        While the store refuses writes the backoff is slept out whole: a buffer that
        fills up does not cut it short (it did, and a store outage under traffic was
        retried on every hand-over). The outage is logged once as it begins, again at
        most every `STILL_DOWN_LOG_S`, and once when a write succeeds again."""
        backoff = self._flush_interval
        outage: Outage | None = None
        while True:
            if outage is None:
                # asyncio.timeout rather than wait_for: 3.11's wait_for can lose a
                # cancellation that arrives as the event is set, leaving a stop waiting.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(backoff):
                        await self._full.wait()
            else:
                await asyncio.sleep(backoff)
            self._full.clear()
            try:
                await self._write_all()
            except StoreError as exc:
                self.counts.failures += 1
                backoff = min(max(backoff * 2, self._flush_interval), MAX_BACKOFF_S)
                now = self._clock()
                if outage is None:
                    outage = Outage(now, now, self.counts.written, self.counts.dropped)
                    log.warning(
                        "usage store refuses writes; records stay buffered (up to auth.buffer_size) "
                        "and are retried with backoff up to %.0fs: %s",
                        MAX_BACKOFF_S,
                        exc,
                    )
                elif now - outage.reported >= STILL_DOWN_LOG_S:
                    outage.reported = now
                    log.warning(
                        "usage store still refuses writes after %.0fs: %d records buffered, %d dropped "
                        "since it began: %s",
                        now - outage.began,
                        self._buffered,
                        self.counts.dropped - outage.dropped,
                        exc,
                    )
                continue
            backoff = self._flush_interval
            if outage is not None:
                log.warning(
                    "usage store writes again after %.0fs: %d records written, %d dropped during the outage",
                    self._clock() - outage.began,
                    self.counts.written - outage.written,
                    self.counts.dropped - outage.dropped,
                )
                outage = None

    async def _write_all(self) -> None:
        """Writes batches until fewer than a full one is left; on PostgreSQL several at
        once (`concurrency`), so the server's work on one overlaps the encoding of the
        next."""
        while self._buffer:
            lanes = min(self._concurrency, -(-self._buffered // self._batch_size))
            outcomes = await asyncio.gather(*(self.flush() for _ in range(lanes)), return_exceptions=True)
            written: list[int] = []
            for outcome in outcomes:
                if isinstance(outcome, BaseException):
                    raise outcome
                written.append(outcome)
            if min(written) < self._batch_size:
                return

    def take_all(self) -> list[UsageChunk]:
        """Empties the buffer: its chunks, for a stop that could not write them."""
        chunks = list(self._buffer)
        self._buffer.clear()
        self._buffered = 0
        return chunks

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
