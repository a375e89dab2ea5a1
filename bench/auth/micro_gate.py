"""CPU per request of auth on the request path, part by part, with the router
benchmark's tenancy: one project key under a project, team and org that each have RPM,
TPM and a daily budget (bench/router/auth_setup.py, bench/router/llmgw-auth.yaml), so
every request is judged against all of them. Then the background usage writer's CPU per
record, on SQLite and (with --postgres) PostgreSQL.

The request is the gateway's own sequence of calls: `AuthGate.known` of a key already
used, falling back on `authenticate` as the router does (the *authenticate* part),
`visible`, `admit`, the `Account` and `UsageRecord` the router makes, and, for every
`BATCH` of requests as the gateway's usage sink hands them over, `AuthGate.record_many`.

Each round runs `-n` requests twice without yielding to the event loop, so no
background task runs in between: once bare, timed as a whole in process CPU time (the
*request path* figure), once with a clock read around each part (the *parts*: that
pass's CPU time shared out in the proportions of each part's wall time, which includes
the clock reads, so their sum is a little above the bare figure). After each
pass the writer empties the buffer (`UsageWriter.settle`), and its CPU time over the
records written is the *writer* figure; it includes the limit and spend exchanges that
ran meanwhile, which are part of what auth costs in the background too.

    .venv/bin/python bench/auth/micro_gate.py [-n 20000] [--rounds 7] [--postgres DSN|auto]

Compare with the gateway's CPU per request without auth (bench/router/overhead.py,
"gateway CPU µs/req", now ≈ 120 µs at concurrency 64): issue #6 allows auth 10 % of it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import asyncpg
from sqlalchemy.engine import make_url

from llmgw.auth.gate import AuthGate
from llmgw.auth.keys import new_key
from llmgw.config import settings_from_yaml
from llmgw.router.usage import NO_TAGS, Account, Tokens, UsageRecord
from llmgw.store import KeyRow, Scope, Store

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "bench" / "router" / "llmgw-auth.yaml"
MODEL = "bench-model"
HIGH_RATE = 1_000_000_000
HIGH_BUDGET_MICROS = 10**15
PARTS = ("authenticate", "visible", "admit", "account", "record_many")
BATCH = 256
"""Records per hand-over to the gate: about what the gateway's usage sink drains at a time
under the router benchmark's load (every 50 ms at several thousand requests a second)."""


async def prepare(store: Store) -> str:
    """The router benchmark's tenancy (limits far above what a run reaches) and a
    project key; returns the key."""
    now = time.time()
    limits = {"rpm": HIGH_RATE, "tpm": HIGH_RATE, "budget_micros": HIGH_BUDGET_MICROS, "budget_period": "day"}
    await store.tenancy.create(Scope(kind="org", id="bench-org", created_at=now, updated_at=now, **limits))
    await store.tenancy.create(
        Scope(kind="team", id="bench-team", parent="bench-org", created_at=now, updated_at=now, **limits)
    )
    await store.tenancy.create(
        Scope(kind="project", id="bench", parent="bench-team", created_at=now, updated_at=now, **limits)
    )
    made = new_key()
    await store.keys.create(KeyRow(made.id, made.hash, project_id="bench", created_at=now, updated_at=now))
    return made.plaintext


async def bare_pass(gate: AuthGate, header: str, n: int, start: int) -> None:
    """One request after another, as the gateway makes them (awaits nothing: the key is
    known after the unmeasured pass, so `authenticate` is not called), and every `BATCH`
    of them accounted for together, as the gateway's usage sink hands them over."""
    tokens = Tokens(250, 18)
    batch: list[tuple[UsageRecord, Tokens | None]] = []
    for i in range(start, start + n):
        now = time.time()
        principal = gate.known(header, now) or await gate.authenticate(header, now)
        gate.visible(principal, MODEL, "")
        counted = gate.admit(principal, 300, now)
        account = Account(principal, counted, NO_TAGS, 0.0, None)
        batch.append(
            (UsageRecord(f"r{i}", MODEL, "bench-1", 200, False, None, 0.0, None, 0.01, account), tokens)
        )
        if len(batch) == BATCH:
            gate.record_many(batch, time.time() - time.monotonic())
            batch = []
    if batch:
        gate.record_many(batch, time.time() - time.monotonic())


async def parts_pass(gate: AuthGate, header: str, n: int, start: int) -> dict[str, float]:
    """The same requests with a clock read between parts: CPU µs per request of each.
    A per-part CPU clock costs more than some parts (a system call), so the parts are
    timed on the wall clock and the pass's CPU time is shared out in their proportions,
    which leaves out the time this process waited for a core on a loaded machine. The
    batch part (`record_many`) is shared out over the batch."""
    clock = time.perf_counter_ns
    cpu = time.process_time()
    spent = dict.fromkeys(PARTS, 0)
    tokens = Tokens(250, 18)
    batch: list[tuple[UsageRecord, Tokens | None]] = []
    for i in range(start, start + n):
        now = time.time()
        t0 = clock()
        principal = gate.known(header, now) or await gate.authenticate(header, now)
        t1 = clock()
        gate.visible(principal, MODEL, "")
        t2 = clock()
        counted = gate.admit(principal, 300, now)
        t3 = clock()
        account = Account(principal, counted, NO_TAGS, 0.0, None)
        batch.append(
            (UsageRecord(f"r{i}", MODEL, "bench-1", 200, False, None, 0.0, None, 0.01, account), tokens)
        )
        t4 = clock()
        spent["authenticate"] += t1 - t0
        spent["visible"] += t2 - t1
        spent["admit"] += t3 - t2
        spent["account"] += t4 - t3
        if len(batch) == BATCH or i == start + n - 1:
            t5 = clock()
            gate.record_many(batch, time.time() - time.monotonic())
            t6 = clock()
            spent["record_many"] += t6 - t5
            batch = []
    cpu_us = (time.process_time() - cpu) * 1e6
    wall_ns = sum(spent.values())
    return {part: cpu_us * ns / wall_ns / n for part, ns in spent.items()}


async def writer_cpu(gate: AuthGate, records: int) -> float:
    """CPU µs per record while the writer empties the buffer."""
    cpu = time.process_time()
    await gate.writer.settle(600)
    return (time.process_time() - cpu) / records * 1e6


async def measure(label: str, location: str, n: int, rounds: int) -> dict[str, object]:
    store = await Store.open(location)
    key = await prepare(store)
    text = CONFIG.read_text().replace("llmgw-auth.db", location)
    settings = settings_from_yaml(text, source=str(CONFIG), environ={})
    gate = AuthGate(settings, store)
    await gate.start()
    header = f"Bearer {key}"
    hot: list[float] = []
    writer: list[float] = []
    parts: dict[str, list[float]] = {part: [] for part in PARTS}
    sent = 0
    try:
        # One unmeasured pass first: principals, counters and ledger entries are made once.
        await bare_pass(gate, header, min(n, 2000), sent)
        sent += min(n, 2000)
        await gate.writer.settle(600)
        for _ in range(rounds):
            cpu = time.process_time()
            await bare_pass(gate, header, n, sent)
            hot.append((time.process_time() - cpu) / n * 1e6)
            sent += n
            writer.append(await writer_cpu(gate, n))
            for part, value in (await parts_pass(gate, header, n, sent)).items():
                parts[part].append(value)
            sent += n
            writer.append(await writer_cpu(gate, n))
        dropped = gate.writer.counts.dropped
    finally:
        await gate.close()
        await store.close()
    return {
        "store": label,
        "n": n,
        "rounds": rounds,
        "request_path_us": hot,
        "writer_us": writer,
        "parts_us": parts,
        "dropped": dropped,
    }


def report(result: dict[str, object]) -> None:
    hot = result["request_path_us"]
    writer = result["writer_us"]
    parts = result["parts_us"]
    assert isinstance(hot, list)
    assert isinstance(writer, list)
    assert isinstance(parts, dict)
    print(f"\n{result['store']}: {result['rounds']} rounds of {result['n']} requests", end="")
    print(f", records dropped: {result['dropped']}")
    print("| CPU µs per request | min | median |")
    print("|---|---:|---:|")
    for part, values in parts.items():
        print(f"| part: {part} | {min(values):.1f} | {statistics.median(values):.1f} |")
    print(
        f"| request path (a pass without the part clocks) | {min(hot):.1f} | {statistics.median(hot):.1f} |"
    )
    print(f"| usage writer, per record | {min(writer):.1f} | {statistics.median(writer):.1f} |")
    print(f"| together (medians) | | {statistics.median(hot) + statistics.median(writer):.1f} |")


async def _admin(dsn: str, statement: str) -> None:
    url = make_url(dsn)
    conn = await asyncpg.connect(
        host=url.host, port=url.port or 5432, user=url.username, database=url.database
    )
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-n", type=int, default=20_000, help="requests per pass (default 20000)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument(
        "--postgres", default="", help="also PostgreSQL: a server DSN, or 'auto' for scripts/test-postgres.sh"
    )
    parser.add_argument("--json", default="", help="write the figures to this file too")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.1f}")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        results.append(await measure("SQLite", str(Path(tmp) / "gate.db"), args.n, args.rounds))
    report(results[-1])
    if args.postgres:
        server = args.postgres
        if server == "auto":
            script = ROOT / "scripts" / "test-postgres.sh"
            server = subprocess.run(
                ["bash", str(script)], capture_output=True, text=True, check=True
            ).stdout.strip()
        name = f"llmgw_gate_{secrets.token_hex(4)}"
        await _admin(server, f'CREATE DATABASE "{name}"')
        try:
            location = make_url(server).set(database=name).render_as_string(False)
            results.append(await measure("PostgreSQL", location, args.n, args.rounds))
        finally:
            await _admin(server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        report(results[-1])
    print(f"\nload average after: {os.getloadavg()[0]:.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    asyncio.run(main())
