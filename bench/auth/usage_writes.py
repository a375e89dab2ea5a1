"""How many usage records a second the store takes, through the same writer the gate
uses, and whether handing records over ever waits.

Three phases per store:
  burst   N records handed over at once (buffer large enough), timed until all are in
          the store: the writer's ceiling in records/s.
  steady  records handed over at a fixed rate (default 5,000/s) for a while, as a busy
          gateway would: records written per second, the most records ever waiting,
          drops, and the hand-over's cost (`UsageWriter.offer`, with which
          `AuthGate.record_many` queues each drained batch): 99.9th percentile and
          slowest.
  stalled the steady phase again, with the store locked by another session for its
          middle third (SQLite: an exclusive transaction; PostgreSQL: an ACCESS
          EXCLUSIVE lock on the records): hand-overs must not notice, the buffer
          absorbs the stall, and the writer catches up after it.

    .venv/bin/python bench/auth/usage_writes.py [--sqlite PATH] [--postgres DSN] [--rate 5000]
        [--seconds 10] [--burst 50000] [--batch 500]

Without --postgres it asks scripts/test-postgres.sh for a server. Each store starts
empty (a new SQLite file; a new PostgreSQL database, dropped afterwards).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import subprocess
import tempfile
import time
from pathlib import Path

import asyncpg
from sqlalchemy.engine import make_url

from llmgw.auth.budgets import BudgetLedger, day_of, spread_spend
from llmgw.auth.usage import UsageChunk, UsageWriter
from llmgw.store import Store, UsageRow
from llmgw.store.engine import create_engine
from llmgw.store.usage import five_minute_sums, group_rows

ROOT = Path(__file__).resolve().parents[2]


SCOPES = ("project:p", "team:t", "org:o")


def row(i: int) -> UsageRow:
    return UsageRow(
        ts=time.time(),
        request_id=f"bench-{i}",
        key_id=f"key{i % 50:05d}",  # 50 keys over 10 projects in 3 teams, 4 models
        user_id=None,
        project_id=f"project-{i % 50 % 10}",
        team_id=f"team-{i % 50 % 10 % 3}",
        org_id="org",
        model=f"model-{i % 4}",
        replica=f"replica-{i % 8}",
        status=200,
        stream=True,
        prompt_tokens=512,
        completion_tokens=128,
        cost_micros=640,
        queue_s=0.002,
        ttft_s=0.05,
        duration_s=0.8,
        tags={"run": "bench"},
    )


def handed_over(i: int) -> UsageChunk:
    """One record as its own hand-over (the gate hands over each drained batch as one):
    the writer's worst case."""
    record = row(i)
    spend = spread_spend({(SCOPES, day_of(record.ts)): record.cost_micros})
    return UsageChunk(group_rows([record]), five_minute_sums([record]), spend, {})


def lanes(store: Store) -> int:
    """Batches in flight at once, as the gate chooses them."""
    return 2 if store.shared else 1


async def burst(store: Store, count: int, batch: int) -> float:
    writer = UsageWriter(
        store.usage, BudgetLedger(), batch_size=batch, buffer_size=count, flush_interval=0.05
    )
    task = asyncio.create_task(writer.run())
    started = time.perf_counter()
    for i in range(count):
        writer.offer(handed_over(i))
    await writer.settle(600)
    elapsed = time.perf_counter() - started
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return count / elapsed


async def hold_lock(location: str, seconds: float) -> None:
    """Locks the store against writers from another connection for `seconds`."""
    engine = create_engine(location)
    try:
        async with engine.connect() as conn:
            if engine.dialect.name == "sqlite":
                await conn.exec_driver_sql("BEGIN EXCLUSIVE")
            else:
                await conn.exec_driver_sql("BEGIN")
                await conn.exec_driver_sql("LOCK TABLE usage_records IN ACCESS EXCLUSIVE MODE")
            await asyncio.sleep(seconds)
            await conn.rollback()
    finally:
        await engine.dispose()


async def steady(store: Store, rate: int, seconds: float, batch: int, stall: float = 0.0) -> dict[str, float]:
    writer = UsageWriter(
        store.usage, BudgetLedger(), batch_size=batch, buffer_size=100_000, flush_interval=1.0
    )
    task = asyncio.create_task(writer.run())
    handed = 0
    offers: list[float] = []
    most_waiting = 0
    stalling = None
    if stall:
        stalling = asyncio.create_task(_stall_later(store.location, seconds / 3, stall))
    started = time.perf_counter()
    while (elapsed := time.perf_counter() - started) < seconds:
        # Hand over what is owed by now, so a late tick catches up instead of lowering the rate.
        while handed < rate * elapsed:
            t0 = time.perf_counter()
            writer.offer(handed_over(handed))
            offers.append(time.perf_counter() - t0)
            handed += 1
        most_waiting = max(most_waiting, writer.pending)
        await asyncio.sleep(0.005)
    offered_for = time.perf_counter() - started
    if stalling is not None:
        await stalling
    await writer.settle(600)
    total = time.perf_counter() - started
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return {
        "handed_per_s": handed / offered_for,
        "written_per_s": writer.counts.written / total,
        "written": writer.counts.written,
        "dropped": writer.counts.dropped,
        "most_waiting": most_waiting,
        "p50_offer_us": sorted(offers)[len(offers) // 2] * 1e6,
        "p99_offer_us": sorted(offers)[int(len(offers) * 0.99)] * 1e6,
        "worst_offer_us": max(offers) * 1e6,
        "catch_up_s": total - offered_for,
    }


async def _stall_later(location: str, after: float, seconds: float) -> None:
    await asyncio.sleep(after)
    await hold_lock(location, seconds)


async def _admin(dsn: str, statement: str) -> None:
    url = make_url(dsn)
    conn = await asyncpg.connect(
        host=url.host, port=url.port or 5432, user=url.username, database=url.database
    )
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


async def measure(name: str, location: str, args: argparse.Namespace) -> None:
    store = await Store.open(location)
    try:
        cpu = time.process_time()
        ceiling = await burst(store, args.burst, args.batch)
        cpu_us = (time.process_time() - cpu) / args.burst * 1e6
        print(f"| {name} | burst | {ceiling:,.0f} | {cpu_us:.0f} CPU µs/record | | | | | | |", flush=True)
        for phase, stall in (("steady", 0.0), ("stalled", args.seconds / 3)):
            result = await steady(store, args.rate, args.seconds, args.batch, stall)
            print(
                f"| {name} | {phase} | {result['written_per_s']:,.0f} | {result['handed_per_s']:,.0f}/s "
                f"| {result['dropped']:.0f} | {result['most_waiting']:,.0f} | {result['p50_offer_us']:.1f} "
                f"| {result['p99_offer_us']:.1f} | {result['worst_offer_us']:,.0f} "
                f"| {result['catch_up_s']:.2f} |",
                flush=True,
            )
    finally:
        await store.close()


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sqlite", default="")
    parser.add_argument("--postgres", default="")
    parser.add_argument("--rate", type=int, default=5000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--burst", type=int, default=50_000)
    parser.add_argument("--batch", type=int, default=500)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.1f}")
    print(
        "| store | phase | written rec/s | offered | dropped | most waiting | hand-over p50 µs "
        "| p99 µs | slowest µs | catch-up after s |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        await measure("SQLite", args.sqlite or str(Path(tmp) / "bench.db"), args)
    server = (
        args.postgres
        or subprocess.run(
            ["bash", str(ROOT / "scripts" / "test-postgres.sh")], capture_output=True, text=True, check=True
        ).stdout.strip()
    )
    name = f"llmgw_bench_{secrets.token_hex(4)}"
    await _admin(server, f'CREATE DATABASE "{name}"')
    try:
        await measure("PostgreSQL", make_url(server).set(database=name).render_as_string(False), args)
    finally:
        await _admin(server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    asyncio.run(main())
