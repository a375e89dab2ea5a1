"""The outbox over a real SQLite store and a real receiver on loopback, with the clock
injected so the schedule's hour passes at once: an event emitted twice (as a restarted
control plane would) is delivered once per webhook, a receiver down for 5 minutes gets
every event once when it comes back, and one down past the hour is given up, logged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from llmgw.notify.hooks import Hook
from llmgw.notify.outbox import Outbox
from llmgw.notify.schedule import RetrySchedule
from llmgw.notify.signing import SIGNATURE_HEADER, verify
from llmgw.store import Store
from llmgw.testing.webhook import WebhookReceiver, receiver

SECRET = b"s3cret"


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def rx() -> Iterator[WebhookReceiver]:
    yield from receiver()


def _outbox(store: Store, rx: WebhookReceiver, clock: Clock, *hooks: Hook) -> Outbox:
    hooks = hooks or (Hook("rx", rx.url, SECRET, (), 2.0),)
    return Outbox(hooks, store.notify, schedule=RetrySchedule(), clock=clock, draw=lambda: 0.999999)


async def _until_settled(outbox: Outbox, store: Store, clock: Clock, until: float) -> None:
    """Sends what is due, moving the clock to each next due time, until `until`."""
    while True:
        await outbox.deliver_due()
        soonest = await store.notify.next_due()
        if soonest is None or soonest > until:
            return
        clock.now = max(clock.now, soonest)


def test_twice_emitted_events_reach_a_receiver_back_after_5_minutes_once_each(
    tmp_path: Path, rx: WebhookReceiver
) -> None:
    async def scenario() -> None:
        store = await Store.open(str(tmp_path / "store.db"))
        clock = Clock()
        began = clock.now
        try:
            first = _outbox(store, rx, clock)
            first.emit("node.lost", "n1:1", {"node": "n1"})
            first.emit("node.lost", "n1:1", {"node": "n1"})
            first.emit("model.failed", "chat-1", {"model": "chat"})
            rx.stop()  # the receiver is down from here
            await first.flush()
            # A restarted server emits the same occurrence again: same id, no new row.
            restarted = _outbox(store, rx, clock)
            restarted.emit("node.lost", "n1:1", {"node": "n1"})
            await restarted.flush()
            await _until_settled(restarted, store, clock, until=began + 300)
            pending = await store.notify.log("rx", 10)
            assert {(d.event_type, d.state) for d in pending} == {
                ("node.lost", "pending"),
                ("model.failed", "pending"),
            }
            assert rx.received == []
            rx.start()  # back after 5 minutes
            await _until_settled(restarted, store, clock, until=began + 3600)
            delivered = await store.notify.log("rx", 10)
            assert {(d.event_type, d.state) for d in delivered} == {
                ("node.lost", "delivered"),
                ("model.failed", "delivered"),
            }
            # Back within the schedule's cap of its return, and never tried twice after.
            assert all(
                d.delivered_at is not None and d.delivered_at - (began + 300) <= 300 for d in delivered
            )
            assert sorted(r.event["type"] for r in rx.received) == ["model.failed", "node.lost"]
            for request in rx.received:
                assert verify(SECRET, request.body, request.headers[SIGNATURE_HEADER.lower()], now=clock.now)
            assert restarted.counts[("rx", "delivered")] == 2
            await restarted.close()
            await first.close()
        finally:
            await store.close()

    asyncio.run(scenario())


def test_a_webhook_gets_only_the_events_it_asked_for_and_each_webhook_its_own_copy(
    tmp_path: Path, rx: WebhookReceiver
) -> None:
    async def scenario() -> None:
        store = await Store.open(str(tmp_path / "store.db"))
        clock = Clock()
        try:
            outbox = _outbox(
                store,
                rx,
                clock,
                Hook("all", rx.url, SECRET, (), 2.0),
                Hook("nodes", rx.url, b"", ("node.lost",), 2.0),
            )
            outbox.emit("node.lost", "n1:1", {"node": "n1"})
            outbox.emit("budget.spent", "team:a:day:0", {"scope": "team:a"})
            await outbox.flush()
            await outbox.deliver_due()
            log = await store.notify.log(None, 10)
            assert sorted((d.webhook, d.event_type, d.state) for d in log) == [
                ("all", "budget.spent", "delivered"),
                ("all", "node.lost", "delivered"),
                ("nodes", "node.lost", "delivered"),
            ]
            unsigned = [r for r in rx.received if SIGNATURE_HEADER.lower() not in r.headers]
            assert [r.event["type"] for r in unsigned] == ["node.lost"]
            await outbox.close()
        finally:
            await store.close()

    asyncio.run(scenario())


def test_a_receiver_that_keeps_refusing_is_given_up_after_the_hour(
    tmp_path: Path, rx: WebhookReceiver
) -> None:
    async def scenario() -> None:
        store = await Store.open(str(tmp_path / "store.db"))
        clock = Clock()
        began = clock.now
        rx.status = 503
        try:
            outbox = _outbox(store, rx, clock)
            outbox.emit("node.lost", "n1:1", {"node": "n1"})
            await outbox.flush()
            await _until_settled(outbox, store, clock, until=began + 7200)
            [delivery] = await store.notify.log("rx", 10)
            assert delivery.state == "failed"
            assert delivery.last_status == 503
            assert "HTTP 503" in delivery.last_error
            assert clock.now - began <= 3600
            assert outbox.counts[("rx", "failed")] == 1
            assert len(rx.received) == delivery.attempts == outbox.counts[("rx", "retried")] + 1
            # Settled deliveries leave the log once old enough; a pending one never does.
            outbox.emit("node.lost", "n2:1", {"node": "n2"})
            await outbox.flush()
            assert await store.notify.purge(before=clock.now + 1) == 1
            assert [d.event_type for d in await store.notify.log("rx", 10)] == ["node.lost"]
            await outbox.close()
        finally:
            await store.close()

    asyncio.run(scenario())
