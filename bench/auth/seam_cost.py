"""What auth, limits and usage add to one request, in CPU time, at the seam the gateway
calls: `authenticate` (a cached key), `visible`, `admit` (RPM, TPM and a budget to
check) and `record`, and then the background writer's share per record.

Compare with the gateway's own CPU per request (bench/router/overhead.py's "gateway
CPU µs/req", bench/router/micro_request_path.py): the issue's bar is that auth on costs
within 10 % of auth off.

    .venv/bin/python bench/auth/seam_cost.py [-n 20000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

from llmgw.auth import AuthGate, UsageEvent
from llmgw.auth.keys import new_key
from llmgw.config import Settings
from llmgw.store import KeyRow, Scope, Store


async def prepare(location: str) -> tuple[Store, str]:
    store = await Store.open(location)
    now = time.time()
    for scope in (
        Scope("org", "o", budget_micros=10**15, created_at=now, updated_at=now),
        Scope("team", "t", "o", allowed_models=("m1", "m2"), created_at=now, updated_at=now),
        Scope("project", "p", "t", rpm=10**9, tpm=10**12, created_at=now, updated_at=now),
    ):
        await store.tenancy.create(scope)
    made = new_key()
    await store.keys.create(KeyRow(made.id, made.hash, project_id="p", created_at=now, updated_at=now))
    return store, made.plaintext


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-n", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        location = str(Path(tmp) / "seam.db")
        store, key = await prepare(location)
        settings = Settings(
            auth={"enabled": True, "store": location, "pricing": {"m1": {"prompt_per_1k": 100}}},
            router={"tenant_label": "team", "tag_labels": ["run"]},
        )
        gate = AuthGate(settings, store)
        await gate.start()
        header = f"Bearer {key}"
        tags = {"run": "bench"}
        hot: list[float] = []
        writer: list[float] = []
        for _ in range(args.rounds):
            cpu = time.process_time()
            for i in range(args.n):
                now = time.time()
                principal = await gate.authenticate(header, now)
                gate.visible(principal, "m1", None)
                admission = gate.admit(principal, "m1", 200, now)
                gate.record(
                    UsageEvent(
                        f"r{i}",
                        "m1",
                        "replica",
                        200,
                        True,
                        200,
                        50,
                        0.001,
                        0.5,
                        0.05,
                        now,
                        principal,
                        tags,
                        admission.counted_tokens,
                    )
                )
            hot.append((time.process_time() - cpu) / args.n * 1e6)
            cpu = time.process_time()
            await gate.writer.settle(600)
            writer.append((time.process_time() - cpu) / args.n * 1e6)
        await gate.close()
        await store.close()
    print(f"load average: {os.getloadavg()[0]:.1f}")
    print("| CPU µs per request | best | median |")
    print("|---|---:|---:|")
    for name, values in (
        ("request path: authenticate + visible + admit + record", hot),
        ("usage writer, per record (SQLite)", writer),
    ):
        ordered = sorted(values)
        print(f"| {name} | {ordered[0]:.1f} | {ordered[len(ordered) // 2]:.1f} |")
    total = sorted(a + b for a, b in zip(hot, writer, strict=True))
    print(f"| together | {total[0]:.1f} | {total[len(total) // 2]:.1f} |")


if __name__ == "__main__":
    asyncio.run(main())
