"""The leader lease on a real PostgreSQL shared by two stores, as two servers share it:
contention step by step with an injected clock; the same claims racing for real, with
exactly one winner each time; both renewal loops running on the database's own clock
with never two leaders; and a takeover once the leader stops renewing, no sooner than
its lease lapsed, at a higher term."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta

from llmgw.store import Store
from llmgw.store.lease import LeaderLease, LeaseTable
from support.control_store import ManualClock

TTL = timedelta(seconds=15)
SHORT_TTL = timedelta(seconds=1.5)
"""Short enough for a quick takeover, long enough that a claim (given a ttl to answer)
is not lost to a busy machine."""


def run(location: str, scenario: Callable[[Store, Store], Awaitable[None]]) -> None:
    async def main() -> None:
        first = await Store.open(location)
        second = await Store.open(location)
        try:
            await scenario(first, second)
        finally:
            await first.close()
            await second.close()

    asyncio.run(main())


def test_two_stores_contend_step_by_step(pg_location: str) -> None:
    async def scenario(one: Store, two: Store) -> None:
        clock = ManualClock()
        a = LeaderLease(LeaseTable(one.engine, db_time=clock), TTL, holder="a", clock=clock)
        b = LeaderLease(LeaseTable(two.engine, db_time=clock), TTL, holder="b", clock=clock)
        assert await a.attempt()
        assert not await b.attempt()
        clock.advance(10)
        assert await a.attempt()
        clock.advance(14)
        assert not await b.attempt(), "a renewed 14 s ago; its lease stands"
        clock.advance(1)
        assert await b.attempt()
        assert b.term == 2
        assert not await a.attempt()
        assert a.term is None

    run(pg_location, scenario)


def test_simultaneous_claims_have_exactly_one_winner(pg_location: str) -> None:
    async def scenario(one: Store, two: Store) -> None:
        clock = ManualClock()
        tables = [LeaseTable(one.engine, db_time=clock), LeaseTable(two.engine, db_time=clock)]
        terms = []
        for round_ in range(20):
            clock.advance(20)  # whoever held it last round has lapsed
            claims = await asyncio.gather(
                *(table.claim("control", f"holder-{round_}-{i}", TTL) for i, table in enumerate(tables * 2))
            )
            winners = [c for c in claims if c is not None]
            assert len(winners) == 1, claims
            terms.append(winners[0].term)
        assert terms == list(range(1, 21)), "each round a new holder, each a new term"

    run(pg_location, scenario)


def test_running_leases_on_the_database_clock_never_overlap_and_take_over(pg_location: str) -> None:
    async def scenario(one: Store, two: Store) -> None:
        a = LeaderLease(LeaseTable(one.engine), SHORT_TTL, holder="a")
        b = LeaderLease(LeaseTable(two.engine), SHORT_TTL, holder="b")
        a.start()
        b.start()
        try:
            leaders = set()
            for _ in range(450):  # about 4.5 s of samples, 3 ttls
                now_a, now_b = a.is_leader(), b.is_leader()
                assert not (now_a and now_b), "two leaders at once"
                leaders |= {name for name, leads in (("a", now_a), ("b", now_b)) if leads}
                await asyncio.sleep(0.01)
            assert len(leaders) == 1, "the leader kept renewing, so nobody took over"
            [first] = leaders
            old, new = (a, b) if first == "a" else (b, a)
            await old.close(release=False)  # dies without handing the lease back
            before = (await old.table.read(old.name)).record
            assert before is not None
            assert before.holder == old.holder
            for _ in range(800):
                if new.is_leader():
                    break
                await asyncio.sleep(0.01)
            assert new.is_leader(), "the standby never took over"
            after = (await new.table.read(new.name)).record
            assert after is not None
            assert after.holder == new.holder
            assert after.term == before.term + 1
            assert after.acquired_at >= before.expires_at, "taken over before the old lease lapsed"
        finally:
            await a.close()
            await b.close()

    run(pg_location, scenario)
