"""A store that cannot be reached, or stalls, made real by cutting or stalling a TCP
relay in front of PostgreSQL: requests with known keys go on, limits keep holding
with each gateway to its share, unknown keys get 503, usage is buffered and never
makes a request wait; when the store is back, everything catches up."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import sqlalchemy as sa
from auth_store_helpers import Clock, Relay, finished, make_key, make_tree, opened, started_gate, through

from llmgw.auth.gate import AuthGate
from llmgw.errors import AuthUnavailable, RateLimitExceeded

NOW = 1_800_000_010.0
EVENTS = 2000


@asynccontextmanager
async def relayed(location: str) -> AsyncIterator[tuple[Relay, str]]:
    url = sa.engine.make_url(location)
    relay = Relay(url.host or "127.0.0.1", url.port or 5432)
    await relay.start()
    try:
        yield relay, through(location, relay)
    finally:
        relay.stalled.clear()
        await relay.cut()


def count_admitted(gate: AuthGate, principal: object, attempts: int) -> int:
    count = 0
    for _ in range(attempts):
        try:
            gate.admit(principal, 0, NOW)  # type: ignore[arg-type]
        except RateLimitExceeded:
            continue
        count += 1
    return count


async def wait_for(condition: object, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "the condition never came true"
        await asyncio.sleep(0.02)


def test_limits_hold_and_known_keys_work_while_the_store_is_unreachable(postgres_location: str) -> None:
    limit = 40

    async def scenario() -> None:
        async with opened(postgres_location) as store:
            await make_tree(store, project={"rpm": limit})
            key = await make_key(store, NOW)
        clock = Clock(NOW)
        async with (
            relayed(postgres_location) as (relay_a, via_a),
            relayed(postgres_location) as (relay_b, via_b),
            started_gate(via_a, clock, sync_interval=0.02) as a,
            started_gate(via_b, clock, sync_interval=0.02) as b,
        ):
            await wait_for(lambda: a.counters.gateways == 2 and b.counters.gateways == 2)
            pa = await a.authenticate(f"Bearer {key}", NOW)
            pb = await b.authenticate(f"Bearer {key}", NOW)
            before = count_admitted(a, pa, 10) + count_admitted(b, pb, 10)
            await wait_for(lambda: a.counters.counted("project:p", NOW)[0] == 10 and b.counters.gateways == 2)
            await asyncio.sleep(0.1)  # a few exchanges, so each knows the other's 10
            await relay_a.cut()
            await relay_b.cut()
            failures = a.sync_failures
            await wait_for(lambda: a.sync_failures > failures)
            # Known keys still authenticate, from memory: a store read would fail now.
            assert a.known(f"Bearer {key}", NOW) is pa
            assert (await a.authenticate(f"Bearer {key}", NOW)) is pa
            during = count_admitted(a, pa, 100) + count_admitted(b, pb, 100)
            # Each keeps to its half of what was left (less while its last exchanges are
            # recent enough to bet on), the pair to the limit; neither stops serving.
            assert before == 20
            assert during <= limit - before + 1
            assert during >= (limit - before) // 2 - 2
            with pytest.raises(AuthUnavailable) as unavailable:
                await a.authenticate(f"Bearer llmgw-00000000-{'x' * 43}", NOW)
            assert unavailable.value.status == 503
            await relay_a.restore()
            await relay_b.restore()
            failures = a.sync_failures
            await asyncio.sleep(0.3)
            await wait_for(lambda: a.counters.gateways == 2)
            # Back in touch, they use what headroom the outage left, and no more.
            after = count_admitted(a, pa, 50) + count_admitted(b, pb, 50)
            assert before + during + after <= limit + 1

    asyncio.run(scenario())


def test_a_stalled_store_costs_no_request(postgres_location: str) -> None:
    async def scenario() -> None:
        async with opened(postgres_location) as store:
            await make_tree(store)
            key = await make_key(store, NOW)
        async with (
            relayed(postgres_location) as (relay, via),
            started_gate(via, Clock(NOW), buffer_size=500, batch_size=100, flush_interval=0.05) as gate,
        ):
            p = await gate.authenticate(f"Bearer {key}", NOW)
            relay.stalled.set()
            # admit and record_many are plain calls: nothing on the request path can wait
            # for the store. What matters is that they go on while a write is stuck in it.
            for i in range(EVENTS):
                counted = gate.admit(p, 10, NOW)
                gate.record_many(
                    [finished(p, f"r{i}", prompt=10, completion=5, counted=counted, tags={"run": "x"})], NOW
                )
                if i % 200 == 0:
                    await asyncio.sleep(0)  # let the writer try, and stall
            assert gate.writer.pending > gate.writer.buffered, "no write was stuck in the stalled store"
            # Everything is either waiting (buffer, or the batches stuck in flight) or
            # counted as dropped; nothing is lost silently.
            assert gate.writer.counts.dropped + gate.writer.pending == EVENTS
            assert gate.writer.counts.dropped >= EVENTS - 500 - 2 * 100
            relay.stalled.clear()
            await wait_for(lambda: gate.writer.buffered == 0, timeout=20)
        async with opened(postgres_location) as store:
            assert await store.usage.count_records() == EVENTS - gate.writer.counts.dropped

    asyncio.run(scenario())
