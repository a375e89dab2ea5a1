"""The leader lease on a SQLite store with an injected clock: first claim, renewal,
refusal while held, expiry, takeover with a new term, the old holder stepping down, a
belief that goes stale on its own, a failed renewal, and handing the lease back."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from llmgw.store import Store
from llmgw.store.lease import LeaderLease, LeaseTable, new_holder_id, renew_interval, still_leading
from support.control_store import ManualClock

TTL = timedelta(seconds=15)


def run(tmp_path: Path, scenario: Callable[[Store, ManualClock], Awaitable[None]]) -> None:
    async def main() -> None:
        store = await Store.open(str(tmp_path / "llmgw.db"))
        try:
            await scenario(store, ManualClock())
        finally:
            await store.close()

    asyncio.run(main())


def lease(
    store: Store, clock: ManualClock, holder: str, changes: list[int | None] | None = None
) -> LeaderLease:
    return LeaderLease(
        LeaseTable(store.engine, db_time=clock),
        TTL,
        holder=holder,
        clock=clock,
        on_change=None if changes is None else changes.append,
    )


def test_the_first_claim_wins_at_term_one_and_renewal_keeps_the_term(tmp_path: Path) -> None:
    async def scenario(store: Store, clock: ManualClock) -> None:
        changes: list[int | None] = []
        a = lease(store, clock, "a", changes)
        assert not a.is_leader()
        assert a.term is None
        assert await a.attempt()
        assert a.is_leader()
        assert a.term == 1
        first = (await a.table.read(a.name)).record
        assert first is not None
        assert (first.holder, first.expires_at) == ("a", clock.now + 15)
        clock.advance(5)
        assert await a.attempt()
        renewed = (await a.table.read(a.name)).record
        assert renewed is not None
        assert (renewed.term, renewed.acquired_at, renewed.expires_at) == (
            1,
            first.acquired_at,
            clock.now + 15,
        )
        assert changes == [1], "a renewal is not a change of leadership"

    run(tmp_path, scenario)


def test_a_held_lease_is_refused_to_another_until_it_lapses(tmp_path: Path) -> None:
    async def scenario(store: Store, clock: ManualClock) -> None:
        a, b = lease(store, clock, "a"), lease(store, clock, "b")
        assert await a.attempt()
        clock.advance(14.9)
        assert not await b.attempt()
        assert a.is_leader()
        assert not b.is_leader()
        clock.advance(0.1)  # 15 s since a's last claim: lapsed
        assert not a.is_leader(), "the holder stops believing the moment its ttl passes"
        assert await b.attempt()
        assert b.term == 2
        record = (await b.table.read(b.name)).record
        assert record is not None
        assert (record.holder, record.acquired_at) == ("b", clock.now)

    run(tmp_path, scenario)


def test_a_deposed_holder_steps_down_at_its_next_renewal_and_the_term_keeps_growing(tmp_path: Path) -> None:
    async def scenario(store: Store, clock: ManualClock) -> None:
        a_changes: list[int | None] = []
        a, b = lease(store, clock, "a", a_changes), lease(store, clock, "b")
        assert await a.attempt()
        clock.advance(20)
        assert await b.attempt()
        assert b.term == 2
        assert not await a.attempt(), "a's claim finds b's live lease"
        assert a_changes == [1, None]
        clock.advance(20)
        assert await a.attempt()
        assert a.term == 3, "every change of holder is a new term"
        assert not await b.attempt()
        assert b.term is None

    run(tmp_path, scenario)


def test_a_belief_goes_stale_without_renewal_even_though_the_row_still_names_it(tmp_path: Path) -> None:
    async def scenario(store: Store, clock: ManualClock) -> None:
        a = lease(store, clock, "a")
        assert await a.attempt()
        clock.advance(15)
        assert not a.is_leader()
        assert a.term is None
        status = await a.table.read(a.name)
        assert status.record is not None
        assert status.record.holder == "a"
        assert not status.held
        # Nobody took it in between, so renewing resumes the same term.
        assert await a.attempt()
        assert a.term == 1

    run(tmp_path, scenario)


def test_a_renewal_that_fails_steps_down_at_once(tmp_path: Path) -> None:
    async def scenario(store: Store, clock: ManualClock) -> None:
        changes: list[int | None] = []
        a = lease(store, clock, "a", changes)
        assert await a.attempt()
        async with store.engine.begin() as conn:
            await conn.execute(sa.text("DROP TABLE control_lease"))  # the store now fails for real
        clock.advance(1)  # well within the ttl
        assert not await a.attempt()
        assert not a.is_leader()
        assert changes == [1, None]

    run(tmp_path, scenario)


def test_closing_hands_the_lease_back_so_a_standby_need_not_wait(tmp_path: Path) -> None:
    async def scenario(store: Store, clock: ManualClock) -> None:
        a, b = lease(store, clock, "a"), lease(store, clock, "b")
        assert await a.attempt()
        await a.close()
        assert not a.is_leader()
        assert await b.attempt()
        assert b.term == 2
        await b.close(release=False)
        assert not await a.attempt(), "without release the lease stands until its ttl"

    run(tmp_path, scenario)


class StuckTable(LeaseTable):
    """A table whose claim never answers and, cancelled, does not let go until told (as a
    driver may not, closing a connection to a store that stopped answering)."""

    def __init__(self, store: Store) -> None:
        super().__init__(store.engine)
        self.let_go = asyncio.Event()

    async def claim(self, name: str, holder: str, ttl: timedelta) -> None:
        while not self.let_go.is_set():
            with contextlib.suppress(asyncio.CancelledError):
                await self.let_go.wait()


def test_closing_is_bounded_when_a_claim_does_not_end(tmp_path: Path) -> None:
    async def scenario(store: Store, clock: ManualClock) -> None:
        table = StuckTable(store)
        try:
            # Closed while its claim is in flight, it returns after a ttl rather than
            # when the claim lets go (the 5 s is a hang detector, 25 ttls).
            stuck = LeaderLease(table, timedelta(seconds=0.2), holder="a")
            stuck.start()
            await asyncio.sleep(0.01)
            closing = asyncio.create_task(stuck.close())
            done, _ = await asyncio.wait({closing}, timeout=5)
            assert done, "close waited for a claim that does not end"
            assert not stuck.is_leader()
            # A caller cancelled while closing stays cancelled.
            other = LeaderLease(table, timedelta(seconds=30), holder="b")
            other.start()
            await asyncio.sleep(0)
            closing_other = asyncio.create_task(other.close())
            await asyncio.sleep(0.01)
            closing_other.cancel()
            with pytest.raises(asyncio.CancelledError):
                await closing_other
        finally:
            table.let_go.set()

    run(tmp_path, scenario)


def test_the_database_clock_serves_when_none_is_injected(tmp_path: Path) -> None:
    async def scenario(store: Store, clock: ManualClock) -> None:
        table = LeaseTable(store.engine)
        record = await table.claim("control", "a", TTL)
        assert record is not None
        status = await table.read("control")
        assert status.held
        assert record.expires_at - record.acquired_at == pytest.approx(15, abs=0.01)
        assert abs(status.now - record.acquired_at) < 60, "SQLite's clock is UNIX seconds"

    run(tmp_path, scenario)


def test_pure_parts() -> None:
    assert renew_interval(TTL) == timedelta(seconds=5)
    assert still_leading(10.0, 9.99)
    assert not still_leading(10.0, 10.0)
    assert not still_leading(None, 0.0)
    holder = new_holder_id(lambda: "gpu-01", lambda: 4242)
    assert holder.startswith("gpu-01:4242:")
    assert holder != new_holder_id(lambda: "gpu-01", lambda: 4242)
    with pytest.raises(ValueError, match="positive duration"):
        LeaderLease(LeaseTable(create_async_engine("sqlite+aiosqlite://")), timedelta(0))
