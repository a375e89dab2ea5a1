"""Makes the store of the `llmgw-auth` benchmark target before the server starts.

    python bench/router/auth_setup.py STORE

An org, team and project, each with its own RPM, TPM and daily budget (far above what
a run can reach, so every request is judged against all of them and none is refused),
and one project key: the one chat.lua sends (`BENCH_KEY`). The key is fixed, not
random, so that wrk, which reads no files, can send it; it is a benchmark's key on a
loopback port, nothing else. A store that already holds it is left as it is.
"""

from __future__ import annotations

import asyncio
import sys
import time

from procs import BENCH_KEY

from llmgw.auth.keys import hash_key
from llmgw.errors import StoreConflict
from llmgw.store import KeyRow, Scope, Store

HIGH_RATE = 1_000_000_000
HIGH_BUDGET_MICROS = 10**15


async def main(location: str) -> None:
    store = await Store.open(location)
    now = time.time()
    limits = {"rpm": HIGH_RATE, "tpm": HIGH_RATE, "budget_micros": HIGH_BUDGET_MICROS, "budget_period": "day"}
    try:
        try:
            await store.tenancy.create(
                Scope(kind="org", id="bench-org", created_at=now, updated_at=now, **limits)
            )
            await store.tenancy.create(
                Scope(
                    kind="team", id="bench-team", parent="bench-org", created_at=now, updated_at=now, **limits
                )
            )
            await store.tenancy.create(
                Scope(
                    kind="project", id="bench", parent="bench-team", created_at=now, updated_at=now, **limits
                )
            )
            key_id = BENCH_KEY.split("-")[1]
            await store.keys.create(
                KeyRow(
                    id=key_id,
                    hash=hash_key(BENCH_KEY),
                    name="overhead benchmark",
                    project_id="bench",
                    created_at=now,
                    updated_at=now,
                )
            )
        except StoreConflict:
            pass  # made by an earlier run
    finally:
        await store.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
