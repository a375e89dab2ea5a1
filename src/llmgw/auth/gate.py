"""`AuthGate`: the seam between the request path and keys, limits, budgets and usage.

The gateway builds one from the settings and an open `Store`, starts it, and then per
request calls, in order:

    principal = gate.known(header, now) or await gate.authenticate(header, now)  # 401
    if not gate.visible(principal, model, adapter_owner): raise NotFound(...)   # 404
    counted_tokens = gate.admit(principal, prompt_tokens_estimate, now)        # 429
    reservation = gate.reserve(principal, model, prompt, output) if principal.budgets
    ... serve, in principal.band; gate.release(reservation) if it fails unanswered ...
    ... serve, in principal.band ...
    ... and, off the request path, for what the usage sink drained:
    gate.record_many([(record, tokens), ...], time.time() - time.monotonic())

Nothing of that waits on the store, but for a key this gateway has never seen: all
active keys and the whole tenancy tree are held in memory, loaded at `start` and
re-read as they change every half `cache_ttl` (so a revoked key stops within
`cache_ttl`), and a key created since is looked up once, then cached (a rejected one
for `negative_ttl`). Rate-limit counts are exchanged with the store every
`sync_interval` and spend totals every second, by background tasks; usage records are
written by another (see `limiter`, `budgets`, `usage` for what each guarantees, also
when the store is unreachable). Every `now` is UNIX time (`time.time()`), because
windows and periods are shared by gateways on different machines.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import NoReturn

from llmgw.auth import spill, windows
from llmgw.auth.budgets import (
    BudgetLedger,
    BudgetRule,
    PayerDay,
    Reservation,
    current_periods,
    day_of,
    spread_spend,
)
from llmgw.auth.directory import Directory
from llmgw.auth.keys import bearer_token, hash_key, key_id_of
from llmgw.auth.limiter import REQUESTS, TOKENS, SharedCounters
from llmgw.auth.metrics import PipelineState, TenantCollector, TenantMetrics, budget_figures
from llmgw.auth.principal import Principal
from llmgw.auth.refusal_errors import Check, budget_spent, budget_spent_event, rate_limited, too_large
from llmgw.auth.refusals import RefusalLog
from llmgw.auth.usage import Finished, UsageChunk, UsageWriter
from llmgw.auth.usage_groups import COMPLETION, COST, PROMPT, TS, Tagged, UsageGroup
from llmgw.config import Settings
from llmgw.core.events import NO_EVENTS, EventSink
from llmgw.errors import (
    AuthUnavailable,
    StoreError,
    Unauthorized,
)
from llmgw.store import KeyRow, Store
from llmgw.store.rows import SCOPE_KINDS, RecordValues, Scope
from llmgw.store.usage import BUCKET_SECONDS, add_to_sums, sum_key

log = logging.getLogger(__name__)

SYNC_INTERVAL_S = 0.25
"""How often limit counts are exchanged with the store. It bounds how long gateways go
without seeing each other's counts, and so how far apart their judgements can drift."""
SPEND_PULL_S = 1.0
FULL_RELOAD_S = 120.0
"""A full reload of keys and tenancy, which also notices deleted rows."""
CHANGE_OVERLAP_S = 60.0
"""How far back each incremental refresh looks past the last one, so rows written by a
gateway whose clock runs behind, or committed late, are not missed."""
PRUNE_EVERY_S = 60.0
REFUSALS_EVERY_S = 1.0
"""How long after the first refusal kept since the last hand-over the refusals' records
are handed to the usage pipeline (and their bounds, per caller and in all, start
afresh): at most once a second, and never while nobody is refused."""
RETENTION_EVERY_S = 600.0
GATEWAY_FORGET_S = 3600.0
DRAIN_TIMEOUT_S = 5.0
GOODBYE_TIMEOUT_S = 2.0
MAX_NEGATIVE = 100_000
MAX_HASHES = 100_000
MAX_CACHED_HEADER_CHARS = 256
"""Longest `Authorization` header kept as a cache key. A key is at most 128 characters,
so only padding makes a header longer: such a header is still checked, each time, but
never stored, so a caller cannot make each cache entry cost kilobytes."""
_INVALID = "the API key is not valid: it may be mistyped, revoked or expired"


class AuthGate:
    """Authentication, visibility, limits, budgets and usage for the client port."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        *,
        clock: Callable[[], float] = time.time,
        sync_interval: float = SYNC_INTERVAL_S,
        gateway_id: str | None = None,
        spill: Path | None = None,
    ) -> None:
        auth = settings.auth
        self._auth = auth
        self._store = store
        self._clock = clock
        self._spill = spill
        """Where usage records the store did not take at stop are kept (`spill`)."""
        self._sync_interval = sync_interval
        self._refresh_interval = max(auth.effective_cache_ttl.total_seconds() / 2, 0.05)
        self._negative_ttl = auth.effective_negative_ttl.total_seconds()
        self._live_within = max(5.0, 8 * sync_interval)
        self.gateway_id = gateway_id or f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"
        self.directory = Directory(auth)
        self._by_header = self.directory.by_header
        self.counters = SharedCounters()
        self.ledger = BudgetLedger()
        self.metrics = TenantMetrics(settings.router.effective_tenant_label, settings.router.tag_labels)
        self.writer = UsageWriter(
            store.usage,
            self.ledger,
            batch_size=auth.effective_batch_size,
            buffer_size=auth.effective_buffer_size,
            flush_interval=auth.effective_flush_interval.total_seconds(),
            # SQLite takes one writer at a time; PostgreSQL overlaps two batches.
            concurrency=2 if store.shared else 1,
        )
        self.refusals = RefusalLog()
        self.events: EventSink = NO_EVENTS
        """Where `budget.spent` goes: the server's webhook outbox, where it has one."""
        self._refusals_kept = asyncio.Event()
        """Set when a refusal was kept since the last hand-over: the hand-over's task
        sleeps on it, so an idle gateway (or one refusing nobody) never wakes for it."""
        self.collector = TenantCollector(
            self.metrics,
            self._pipeline_state,
            lambda: budget_figures(self.directory.scopes, self.ledger, time.time()),
        )
        """Register it in the gateway's Prometheus registry."""
        self.sync_failures = 0
        self.store_reads = 0
        """Key lookups that went to the store (cache misses)."""
        self._negative: dict[int, float] = {}
        """Rejected key (`_negative_key` of its hash) -> until when it stays rejected."""
        self._hashes: dict[str, str] = {}
        """Authorization header -> key hash, for headers that carried a valid key."""
        self._inflight: dict[str, asyncio.Future[KeyRow | None]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._last_refresh = 0.0
        self._last_full = 0.0
        self._last_retention = 0.0

    # --- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        """Loads keys and tenancy, joins the gateways sharing the store, and starts the
        background tasks. `StoreUnavailable` when the store cannot be reached: a gateway
        with auth on does not serve without having read its keys once."""
        now = self._clock()
        await self._store.counters.register(self.gateway_id, socket.gethostname(), os.getpid(), now)
        await self._reload()
        await self._exchange()
        await self._pull_spend()
        self._replay_spill()
        self._tasks = [
            asyncio.create_task(self._every(self._refresh_interval, self._refresh), name="auth-refresh"),
            asyncio.create_task(self._every(self._sync_interval, self._exchange), name="auth-limits"),
            asyncio.create_task(self._every(SPEND_PULL_S, self._pull_spend), name="auth-spend"),
            asyncio.create_task(self._every(PRUNE_EVERY_S, self.prune), name="auth-prune"),
            asyncio.create_task(self.writer.run(), name="auth-usage"),
            asyncio.create_task(self._hand_refusals_when_kept(), name="auth-refusals"),
        ]

    async def close(self) -> None:
        """Stops the tasks, writes what usage is buffered (for a few seconds at most) and
        leaves the group of gateways."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        await self._hand_refusals()
        await self.writer.drain(DRAIN_TIMEOUT_S)
        self._spill_left()
        try:
            async with asyncio.timeout(GOODBYE_TIMEOUT_S):
                await self._goodbye()
        except (StoreError, TimeoutError) as exc:
            log.warning("could not say goodbye to the store: %s", exc or "it did not answer")

    def _spill_left(self) -> None:
        """Keeps what the writer could not write at stop in the spill file."""
        left = self.writer.take_all()
        if not left:
            return
        count = sum(chunk.size for chunk in left)
        if self._spill is None:
            self.writer.counts.dropped += count
            log.error("%d usage records the store did not take are lost: no state directory", count)
            return
        try:
            spill.dump(self._spill, left)
        except OSError as exc:
            self.writer.counts.dropped += count
            log.error("%d usage records the store did not take are lost: %s", count, exc)
            return
        log.warning(
            "%d usage records the store did not take are kept in %s, to be written at the next start",
            count,
            self._spill,
        )

    def _replay_spill(self) -> None:
        """Puts the records a previous stop kept in the spill file back in the buffer."""
        if self._spill is None:
            return
        try:
            chunks, bad = spill.load(self._spill)
        except OSError as exc:
            log.error("could not read the usage spill file %s: %s", self._spill, exc)
            return
        if not chunks and not bad:
            return
        offered = kept = 0
        for chunk in chunks:
            offered += chunk.size
            if self.writer.offer(chunk):
                kept += chunk.size
        log.warning(
            "replaying %d usage records kept at the last stop in %s (%d did not fit the buffer, "
            "%d lines could not be read)",
            kept,
            self._spill,
            offered - kept,
            bad,
        )

    async def _goodbye(self) -> None:
        await self._exchange()
        await self._store.counters.leave(self.gateway_id)

    async def _every(self, interval: float, step: Callable[[], Awaitable[None]]) -> None:
        """Runs `step` every `interval` seconds; a failing store is logged when the
        failures begin and when they end, not at every try (four a second for the limit
        exchange)."""
        failing_since: float | None = None
        while True:
            await asyncio.sleep(interval)
            try:
                await step()
            except StoreError as exc:  # the loop must outlive an unreachable store
                self.sync_failures += 1
                if failing_since is None:
                    failing_since = time.monotonic()
                    log.warning("auth store exchange failed (%s), retrying quietly: %s", step.__name__, exc)
                continue
            if failing_since is not None:
                log.warning(
                    "auth store exchange (%s) works again after %.0fs",
                    step.__name__,
                    time.monotonic() - failing_since,
                )
                failing_since = None

    # --- keeping the caches current ----------------------------------------------------

    async def _reload(self) -> None:
        started = self._clock()
        scopes: list[Scope] = []
        for kind in SCOPE_KINDS:
            scopes.extend(await self._store.tenancy.find(kind))
        keys = await self._store.keys.active(started)
        self.directory.replace(scopes, keys, started)
        self._last_refresh = started
        self._last_full = started

    async def _refresh(self) -> None:
        started = self._clock()
        if started - self._last_full >= FULL_RELOAD_S:
            await self._reload()
            return
        since = self._last_refresh - CHANGE_OVERLAP_S
        scopes: list[Scope] = []
        for kind in SCOPE_KINDS:
            scopes.extend(await self._store.tenancy.changed_since(kind, since))
        keys = await self._store.keys.changed_since(since)
        self.directory.apply(scopes, keys, self._clock())
        self._last_refresh = started

    async def _exchange(self) -> None:
        now = self._clock()
        pushed = self.counters.to_push(now)
        since = windows.window_start(now) - windows.WINDOW_S
        others, live, oldest = await self._store.counters.exchange(
            self.gateway_id, pushed, since, now, self._live_within
        )
        self.counters.exchanged(pushed, others, live, self._clock(), pushed_at=now, others_pushed_at=oldest)

    async def _pull_spend(self) -> None:
        now = self._clock()
        totals = await self._store.usage.spend_totals(current_periods(now))
        self.ledger.pulled(totals, now)

    async def prune(self) -> None:
        """Maintenance, run every minute: forgets old limit counts and silent gateways,
        and (every ten minutes) deletes usage records past `usage_retention`; the
        five-minute sums and the spend ledger are never pruned."""
        now = self._clock()
        self.counters.prune(now)
        oldest = windows.window_start(now) - 2 * windows.WINDOW_S
        await self._store.counters.prune(oldest, now - GATEWAY_FORGET_S)
        retention = self._auth.effective_usage_retention
        if retention is not None and now - self._last_retention >= RETENTION_EVERY_S:
            self._last_retention = now
            pruned = await self._store.usage.prune(now - retention.total_seconds())
            if pruned:
                log.info("pruned %d usage records older than auth.usage_retention", pruned)

    def key_changed(self, key: KeyRow) -> None:
        """Takes in a key created or revoked through this process's admin API at once."""
        now = self._clock()
        self._negative.pop(_negative_key(key.hash), None)
        if key.active(now):
            self.directory.apply((), (key,), now)
        else:
            self.directory.forget_key(key.id)

    # --- the request path --------------------------------------------------------------

    def known(self, authorization_header: str | None, now: float) -> Principal | None:
        """The principal of a key this gateway holds and has used before with this very
        header, unexpired; None for anything else, which `authenticate` then decides. The
        request path asks this first because it awaits nothing: the usual request pays
        one dictionary lookup and no coroutine."""
        if authorization_header is None:
            return None
        principal = self._by_header.get(authorization_header)
        if principal is None or (principal.expires_at is not None and now >= principal.expires_at):
            return None
        return principal

    async def authenticate(self, authorization_header: str | None, now: float) -> Principal:
        """The principal behind an `Authorization: Bearer` header, or `Unauthorized`.
        Awaits nothing for a key in memory; a key never seen costs one store read
        (`AuthUnavailable` if the store cannot answer it)."""
        key_hash = self._hashes.get(authorization_header) if authorization_header else None
        if key_hash is None:
            key_hash = self._hash_of(authorization_header)
        principal = self.directory.principal(key_hash, now)
        if principal is not None:
            # Only a header that carried a valid key is remembered, so headers made up
            # by callers without one cost no memory.
            assert authorization_header is not None  # a key came out of it
            if len(authorization_header) <= MAX_CACHED_HEADER_CHARS:
                self._remember_hash(authorization_header, key_hash)
                if len(self._by_header) < MAX_HASHES:
                    self.directory.remember(authorization_header, principal)
            return principal
        if self.directory.has(key_hash):
            raise Unauthorized(
                "the API key's owner cannot use it now (a disabled person, or personal use is off)",
                code="invalid_api_key",
            )
        rejected_until = self._negative.get(_negative_key(key_hash))
        if rejected_until is not None and rejected_until > now:
            raise Unauthorized(_INVALID, code="invalid_api_key")
        row = await self._lookup(key_hash)
        if row is not None and row.active(now):
            self.directory.apply((), (row,), now)
            principal = self.directory.principal(key_hash, now)
            if principal is None:
                # Its project or person is newer than the last refresh.
                await self._refresh_now()
                principal = self.directory.principal(key_hash, now)
            if principal is not None:
                return principal  # remembered by the header at its next use
        self._reject(key_hash, now)
        raise Unauthorized(_INVALID, code="invalid_api_key")

    def _hash_of(self, authorization_header: str | None) -> str:
        """The stored hash of the key in the header (a well-formed key only)."""
        token = bearer_token(authorization_header)
        if token is None:
            raise Unauthorized(
                "no API key: send one as 'Authorization: Bearer <key>'", code="missing_api_key"
            )
        if key_id_of(token) is None:
            raise Unauthorized(_INVALID, code="invalid_api_key")
        return hash_key(token)

    def _remember_hash(self, authorization_header: str, key_hash: str) -> None:
        """Keeps the hash of a valid key by its header for the next request with it
        (hashing is most of what checking a known key costs, and `by_header` is emptied
        whenever anything changes)."""
        hashes = self._hashes
        if authorization_header not in hashes:
            if len(hashes) >= MAX_HASHES:
                hashes.clear()
            hashes[authorization_header] = key_hash

    async def _refresh_now(self) -> None:
        try:
            await self._refresh()
        except StoreError as exc:
            raise AuthUnavailable(
                "the key store cannot be reached to check this key; try again shortly", retry_after=5
            ) from exc

    async def _lookup(self, key_hash: str) -> KeyRow | None:
        pending = self._inflight.get(key_hash)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[KeyRow | None] = asyncio.get_running_loop().create_future()
        self._inflight[key_hash] = future
        try:
            self.store_reads += 1
            row = await self._store.keys.by_hash(key_hash)
        except StoreError as exc:
            future.set_exception(exc)
            future.exception()  # retrieved here, so a lone waiter leaves no warning behind
            raise AuthUnavailable(
                "the key store cannot be reached to check this key; try again shortly", retry_after=5
            ) from exc
        finally:
            del self._inflight[key_hash]
        future.set_result(row)
        return row

    def _reject(self, key_hash: str, now: float) -> None:
        if len(self._negative) >= MAX_NEGATIVE:
            self._negative = {h: t for h, t in self._negative.items() if t > now}
            if len(self._negative) >= MAX_NEGATIVE:
                self._negative.clear()
        self._negative[_negative_key(key_hash)] = now + self._negative_ttl

    def visible(self, principal: Principal, model_name: str, adapter_owner: str | None) -> bool:
        """Whether the caller may see `model_name` at all: every level that lists its
        allowed models lists it, and an adapter with an owner is visible only inside
        that owner. Not visible is answered as not existing (404)."""
        if adapter_owner and not principal.owns(adapter_owner):
            return False
        return principal.allows(model_name)

    def admit(self, principal: Principal, prompt_tokens_estimate: int, now: float) -> int:
        """Counts the request against its limits, or refuses it: `InsufficientQuota` when
        a budget is spent, `RateLimitExceeded` when RPM or TPM is reached, `BadRequest`
        when the estimate alone is over the TPM limit (it could never pass: a 429 would
        be retried for ever). Returns the tokens counted against TPM (0 without a TPM
        limit), which the answer's real count later replaces."""
        if principal.budgets:
            spent = self.ledger.exceeded(principal.budget_check, now)
            if spent is not None:
                self._refuse_budget(principal, spent, now)
        cost = prompt_tokens_estimate if prompt_tokens_estimate > 0 else 0
        if not self.counters.take(principal.meter, cost, now):
            self._refuse_rate(principal, cost, now)
        return cost if principal.tpm is not None else 0

    def reserve(
        self, principal: Principal, model: str, prompt_tokens: int, output_tokens: int
    ) -> Reservation:
        """Holds the most an admitted request may cost (`prompt_tokens` and `output_tokens`
        priced as `model` is) against its payer's budgets until it ends, so requests
        arriving together cannot all pass a budget that only one of them fits. Asked
        for callers with budgets only, after `admit`."""
        price = self._auth.price(model)
        micros = (prompt_tokens * price.prompt_per_1k + output_tokens * price.completion_per_1k) // 1000
        return self.ledger.reserve(principal.spend_scopes, micros)

    def release(self, reservation: Reservation) -> None:
        """Lets go of the reservation of a request that ended without an answer to account
        (it failed, or its client left); one answered is released when accounted."""
        self.ledger.release(reservation)

    def _refuse_budget(self, principal: Principal, spent: BudgetRule, now: float) -> NoReturn:
        self.metrics.refused(principal.tenant(self.metrics.level), "budget")
        self.events.emit("budget.spent", *budget_spent_event(spent, now))
        raise budget_spent(spent, now)

    def _refuse_rate(self, principal: Principal, cost: int, now: float) -> NoReturn:
        """The 429 for a request `SharedCounters.take` refused: each limit judged again
        (nothing was counted, so the same verdicts), the one to wait longest for named."""
        tpm = principal.tpm
        if tpm is not None and cost > tpm.limit:
            self.metrics.refused(principal.tenant(self.metrics.level), "too_large")
            raise too_large(tpm, cost)
        checks: list[Check] = []
        for dim, rule, amount in ((REQUESTS, principal.rpm, 1), (TOKENS, principal.tpm, cost)):
            if rule is not None:
                checks.append((dim, rule, amount, self.counters.judge(rule, dim, amount, now)))
        self.metrics.refused(principal.tenant(self.metrics.level), "rate_limit")
        raise rate_limited(checks)

    def refused(
        self, principal: Principal | None, status: int, request_id: str, started: float, finished: float
    ) -> None:
        """A request the gateway refused itself (any status it answered without a replica's
        answer), for a usage record: kept within bounds, and handed to the usage pipeline
        every `REFUSALS_EVERY_S` (see `refusals`). `principal` is None for a 401: counted
        only. Times on the request path's monotonic clock."""
        self.refusals.add(principal, status, request_id, started, finished)
        if principal is not None and not self._refusals_kept.is_set():
            self._refusals_kept.set()

    async def _hand_refusals_when_kept(self) -> None:
        """Hands the refusals on `REFUSALS_EVERY_S` after the first one since the last
        hand-over, and sleeps until there is one (a refusal without a caller is only
        counted: nothing to hand on)."""
        kept = self._refusals_kept
        while True:
            await kept.wait()
            await asyncio.sleep(REFUSALS_EVERY_S)
            kept.clear()  # before the take: one kept from here on sets it again
            await self._hand_refusals()

    async def _hand_refusals(self) -> None:
        kept = self.refusals.take()
        if kept:
            self.record_many(kept, time.time() - time.monotonic())

    def record_many(self, finished: Sequence[Finished], wall_offset: float) -> None:
        """Accounts the finished requests the gateway's usage sink drained at once (those
        without an account, made with auth off, are passed over): replaces the token
        estimates counted at admission by the real counts, charges budgets, counts
        metrics, and queues the records with their five-minute sums and spend as one
        `UsageChunk`. Never blocks; a full buffer drops the chunk and counts its records.

        The records' times are on the request path's monotonic clock; `wall_offset`
        (UNIX time minus that clock, read once per hand-over) makes them UNIX time.

        Per request only its record is made, into the list of its group (requests of
        one caller, model, status and streaming that ended in one five-minute bucket):
        a hand-over holds hundreds of requests from a few callers, so everything else
        is summed per group, and then applied once per group."""
        groups: dict[tuple[int, str, int, bool, int], UsageGroup] = {}
        tagged: list[Tagged] = []
        group: UsageGroup | None = None
        values: list[RecordValues] = []
        counted = 0
        # The current group, compared with each record before a group is looked up
        # (a hand-over is mostly runs of records alike).
        principal_now: Principal | None = None
        model_now, status_now, stream_now = "", 0, False
        bucket_from = bucket_to = 0.0
        prompt_price = completion_price = 0
        for record, tokens in finished:
            account = record.account
            if account is None:
                continue
            principal, estimate, tags, queued, reservation = account
            if reservation is not None:
                self.ledger.release(reservation)
            started, ended = record.started, record.finished
            ts = ended + wall_offset
            if (
                principal is not principal_now
                or record.model != model_now
                or record.status != status_now
                or record.stream is not stream_now
                or not bucket_from <= ts < bucket_to
            ):
                if group is not None:
                    group.counted += counted
                counted = 0
                principal_now, model_now = principal, record.model
                status_now, stream_now = record.status, record.stream
                group = self._group_of(groups, principal, model_now, status_now, stream_now, ts)
                bucket_from, bucket_to = group.bucket, group.bucket + BUCKET_SECONDS
                values = group.values
                prompt_price, completion_price = group.prompt_price, group.completion_price
            if tokens is None:
                prompt = completion = 0
            else:
                prompt, completion = tokens.prompt, tokens.completion
            if tags:
                tagged.append((tags, prompt, completion))
            first_byte = record.first_byte
            values.append(
                (
                    ts,
                    record.request_id,
                    record.endpoint,
                    prompt,
                    completion,
                    # Micro-units: prices are per thousand tokens.
                    (prompt * prompt_price + completion * completion_price) // 1000,
                    queued,
                    None if first_byte is None else first_byte - started,
                    ended - started,
                    tags or None,
                )
            )
            counted += estimate
        if group is not None:
            group.counted += counted
            self._account_groups(groups.values(), tagged)

    def _group_of(
        self,
        groups: dict[tuple[int, str, int, bool, int], UsageGroup],
        principal: Principal,
        model: str,
        status: int,
        stream: bool,
        ts: float,
    ) -> UsageGroup:
        bucket = int(ts // BUCKET_SECONDS) * BUCKET_SECONDS
        group_key = (id(principal), model, status, stream, bucket)
        group = groups.get(group_key)
        if group is None:
            price = self._auth.price(model)
            group = groups[group_key] = UsageGroup(
                principal, model, status, stream, bucket, price.prompt_per_1k, price.completion_per_1k
            )
        return group

    def _account_groups(self, groups: Iterable[UsageGroup], tagged: Sequence[Tagged]) -> None:
        """`record_many`'s sums, made and applied once per group of requests alike."""
        metrics = self.metrics
        level = metrics.level
        corrections: dict[str, tuple[int, float]] = {}
        spend: dict[PayerDay, int] = {}
        charged: dict[PayerDay, int] = {}
        chunk = UsageChunk(size=0)
        records = chunk.records
        for group in groups:
            principal, values = group.principal, group.values
            requests = len(values)
            prompt = sum(map(PROMPT, values))
            completion = sum(map(COMPLETION, values))
            cost = sum(map(COST, values))
            tpm = principal.tpm
            if tpm is not None:
                correction = prompt + completion - group.counted
                if correction:
                    last = max(map(TS, values))
                    so_far, at = corrections.get(tpm.scope, (0, last))
                    corrections[tpm.scope] = (so_far + correction, max(at, last))
            if cost > 0 and principal.spend_scopes:
                payer = (principal.spend_scopes, day_of(group.bucket))
                spend[payer] = spend.get(payer, 0) + cost
                # Only a principal with budgets needs its spend counted before the store has it.
                if principal.budgets:
                    charged[payer] = charged.get(payer, 0) + cost
            tenant = principal.tenant(level)
            metrics.counted(tenant, group.model, group.status, requests, prompt, completion)
            if cost > 0:
                metrics.spent(tenant, group.model, cost)
            errors = requests if group.status >= 400 else 0
            identity = principal.row_identity
            key = sum_key(group.bucket, *identity, group.model)
            add_to_sums(chunk.sums, key, requests, errors, prompt, completion, cost)
            record_key = (*identity, group.model, group.status, group.stream)
            kept = records.get(record_key)
            if kept is None:
                records[record_key] = values
            else:
                kept.extend(values)  # one caller's two buckets, or two principals of one key
            chunk.size += requests
        for tags, prompt, completion in tagged:
            metrics.tagged(tags, prompt, completion)
        for scope, (tokens, at) in corrections.items():
            self.counters.add(scope, 0, tokens, at)
        chunk.spend = spread_spend(spend)
        chunk.charged = chunk.spend if charged == spend else spread_spend(charged)
        if chunk.charged:
            self.ledger.charge(chunk.charged)
        self.writer.offer(chunk)

    def _pipeline_state(self) -> PipelineState:
        counts = self.writer.counts
        return PipelineState(
            written=counts.written,
            dropped=counts.dropped,
            buffered=self.writer.buffered,
            write_failures=counts.failures,
            sync_failures=self.sync_failures,
            gateways=self.counters.gateways,
            refusals_unrecorded=self.refusals.unrecorded,
            unauthenticated=self.refusals.anonymous,
        )


def _negative_key(key_hash: str) -> int:
    """A rejected key's entry in the negative cache: 64 bits of its SHA-256, an int of a
    few dozen bytes rather than the 64-character hex text. Two keys sharing them by
    chance (about 1 in 10^14 for a new key against a full cache) would only make the
    new one wait out `negative_ttl`."""
    return int(key_hash[:16], 16)
