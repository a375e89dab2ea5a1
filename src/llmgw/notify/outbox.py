"""The outbox: events taken without blocking anyone, kept in the store, POSTed to each
webhook that wants them, and retried on `RetrySchedule` until delivered or given up.

`emit` (the `EventSink` the control plane and the auth gate hold) only appends to a
bounded in-memory queue and wakes the loop: it runs on the request path and in the
reconcile loop, which must never wait for a database or a receiver. The loop (`run`,
one task per server) writes the queue to `notify_deliveries` first, one row per event
and webhook with the event's id in the key, so an event emitted twice is delivered once
per webhook and one that was written survives a restart; then it sends what is due.

Counted in `llmgw_notify_deliveries_total{webhook,outcome}`: delivered, retried (an
attempt failed and another is scheduled), failed (given up), dropped (the in-memory
queue was full, or the store refused the rows).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from llmgw.errors import StoreError
from llmgw.notify.events import TEST_EVENT, Event
from llmgw.notify.hooks import Hook
from llmgw.notify.schedule import RetrySchedule
from llmgw.notify.signing import SIGNATURE_HEADER, sign
from llmgw.store.notify import DELIVERED, FAILED, PENDING, Delivery, NotifyRepo

log = logging.getLogger(__name__)

QUEUE_LIMIT = 10_000
"""Events held in memory before the loop writes them; past it, new ones are dropped and
counted (a store down that long has bigger news)."""
_SEEN_LIMIT = 4096
"""Event ids this process already queued: a budget refused on every request emits the
same event each time, and only the first is worth a queue slot."""
_BATCH = 50
_IDLE_POLL_S = 5.0
"""A loop with nothing due looks again this often: another server sharing the store may
have queued rows, and a claimed row whose server died comes due again."""
_ANSWER_CHARS = 200
KEEP_S = 30 * 86_400.0
"""Delivered and given-up deliveries are kept this long for the log, then deleted."""
_PURGE_EVERY_S = 3600.0


@dataclass(frozen=True)
class Attempt:
    """What the receiver answered to one POST."""

    status: int | None
    answer: str
    error: str

    @property
    def delivered(self) -> bool:
        return self.status is not None and 200 <= self.status < 300

    def as_json(self) -> dict[str, Any]:
        return {
            "delivered": self.delivered,
            "status": self.status,
            "answer": self.answer,
            "error": self.error,
        }


class Outbox:
    """Queues, stores and delivers the events of one server."""

    def __init__(
        self,
        hooks: Sequence[Hook],
        repo: NotifyRepo,
        *,
        schedule: RetrySchedule | None = None,
        clock: Callable[[], float] = time.time,
        draw: Callable[[], float] = random.random,
        cluster: str = "",
    ) -> None:
        self.hooks = {hook.name: hook for hook in hooks}
        self._repo = repo
        self.schedule = schedule or RetrySchedule()
        self._clock = clock
        self._draw = draw
        self._cluster = cluster
        self._queue: deque[Event] = deque()
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._wake = asyncio.Event()
        self._session: aiohttp.ClientSession | None = None
        self.counts: dict[tuple[str, str], int] = {}
        self._purged_at = 0.0

    # --- taking events (never blocks) -----------------------------------------------

    def emit(self, event_type: str, key: str, data: Mapping[str, Any]) -> None:
        if not any(hook.wants(event_type) for hook in self.hooks.values()):
            return
        event = Event.of(event_type, key, data, self._clock(), self._cluster)
        if event.id in self._seen:
            return
        self._seen[event.id] = None
        if len(self._seen) > _SEEN_LIMIT:
            self._seen.popitem(last=False)
        if len(self._queue) >= QUEUE_LIMIT:
            self._count(event, "dropped")
            return
        self._queue.append(event)
        self._wake.set()

    def _count(self, event: Event, outcome: str) -> None:
        for hook in self.hooks.values():
            if hook.wants(event.type):
                self._counted(hook.name, outcome)

    def _counted(self, webhook: str, outcome: str) -> None:
        self.counts[webhook, outcome] = self.counts.get((webhook, outcome), 0) + 1

    # --- the loop ----------------------------------------------------------------------

    async def run(self) -> None:
        """Until cancelled: writes what was emitted, sends what is due, sleeps until the
        next is due or something is emitted."""
        try:
            while True:
                self._wake.clear()
                wait_s = _IDLE_POLL_S
                try:
                    await self.flush()
                    await self.deliver_due()
                    await self._purge()
                    soonest = await self._repo.next_due()
                    if soonest is not None:
                        wait_s = min(max(soonest - self._clock(), 0.0), _IDLE_POLL_S)
                except StoreError as exc:  # the store comes back; the queue waits in memory
                    log.warning("notify: the store cannot be reached (%s); trying again", exc)
                except Exception:  # a bug must not end deliveries for good: logged, and tried again
                    log.exception("notify: a delivery round failed")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), wait_s)
        finally:
            await self.close()

    async def _purge(self) -> None:
        now = self._clock()
        if now - self._purged_at >= _PURGE_EVERY_S:
            self._purged_at = now
            await self._repo.purge(now - KEEP_S)

    async def flush(self) -> None:
        """Writes every queued event, one row per webhook that wants it."""
        while self._queue:
            batch = [self._queue.popleft() for _ in range(min(len(self._queue), _BATCH))]
            rows = [
                (event.id, hook.name, event.type, event.body().decode())
                for event in batch
                for hook in self.hooks.values()
                if hook.wants(event.type)
            ]
            try:
                await self._repo.enqueue(rows, self._clock())
            except StoreError:
                self._queue.extendleft(reversed(batch))
                raise

    async def deliver_due(self) -> None:
        """Sends every delivery due now, a batch at a time."""
        while True:
            due = await self._repo.due(self._clock(), _BATCH)
            for delivery in due:
                await self._deliver(delivery)
            if len(due) < _BATCH:
                return

    async def _deliver(self, delivery: Delivery) -> None:
        hook = self.hooks.get(delivery.webhook)
        now = self._clock()
        if hook is None:  # removed from the settings since it was queued
            await self._repo.settle(
                delivery, state=FAILED, status=None, error="no such webhook in notify.webhooks", now=now
            )
            self._counted(delivery.webhook, "failed")
            return
        if not await self._repo.claim(delivery, now + hook.timeout_s + _IDLE_POLL_S):
            return
        attempt = await self.post(hook, delivery.body.encode())
        now = self._clock()
        if attempt.delivered:
            await self._repo.settle(delivery, state=DELIVERED, status=attempt.status, error="", now=now)
            self._counted(hook.name, "delivered")
            return
        why = attempt.error or f"HTTP {attempt.status}: {attempt.answer}"
        again = self.schedule.next_at(delivery.created_at, delivery.attempts + 1, now, self._draw())
        if again is None:
            log.warning(
                "notify: %s to %s given up after %d attempts: %s",
                delivery.event_id,
                hook.name,
                delivery.attempts + 1,
                why,
            )
            await self._repo.settle(delivery, state=FAILED, status=attempt.status, error=why, now=now)
            self._counted(hook.name, "failed")
        else:
            await self._repo.settle(
                delivery, state=PENDING, status=attempt.status, error=why, now=now, next_at=again
            )
            self._counted(hook.name, "retried")

    async def post(self, hook: Hook, body: bytes) -> Attempt:
        """One POST of `body` to `hook`, signed now; what the receiver answered."""
        headers = {"content-type": "application/json", "user-agent": "llmgw-notify"}
        if hook.secret:
            headers[SIGNATURE_HEADER] = sign(hook.secret, body, int(self._clock()))
        session = self._session
        if session is None or session.closed:
            session = self._session = aiohttp.ClientSession()
        try:
            async with session.post(
                hook.url,
                data=body,
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=hook.timeout_s),
                allow_redirects=False,
            ) as answer:
                text = (await answer.content.read(_ANSWER_CHARS * 4)).decode(errors="replace")
                return Attempt(answer.status, text[:_ANSWER_CHARS], "")
        except TimeoutError:
            return Attempt(None, "", f"no answer within {hook.timeout_s:g}s")
        except aiohttp.ClientError as exc:
            return Attempt(None, "", f"{type(exc).__name__}: {exc}"[:_ANSWER_CHARS])

    async def send_test(self, name: str) -> Attempt:
        """Sends a `notify.test` event to webhook `name` now, records it in the delivery
        log, and returns the answer; not retried."""
        hook = self.hooks[name]
        now = self._clock()
        event = Event.of(TEST_EVENT, f"{name}:{now}", {"webhook": name}, now, self._cluster)
        attempt = await self.post(hook, event.body())
        # Written once answered, settled: the loop never sees it pending, so never sends it twice.
        await self._repo.record(
            (event.id, name, event.type, event.body().decode()),
            state=DELIVERED if attempt.delivered else FAILED,
            status=attempt.status,
            error="" if attempt.delivered else attempt.error or f"HTTP {attempt.status}: {attempt.answer}",
            now=self._clock(),
        )
        self._counted(name, "delivered" if attempt.delivered else "failed")
        return attempt

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


class NotifyCollector(Collector):
    """`llmgw_notify_deliveries_total{webhook,outcome}`, read from the outbox's counts."""

    def __init__(self, outbox: Outbox) -> None:
        self._outbox = outbox

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "llmgw_notify_deliveries",
            "Webhook delivery attempts by outcome: delivered, retried (another attempt is "
            "scheduled), failed (given up), dropped (never queued).",
            labels=("webhook", "outcome"),
        )
        for (webhook, outcome), count in sorted(self._outbox.counts.items()):
            family.add_metric((webhook, outcome), count)
        yield family
