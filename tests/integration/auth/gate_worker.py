"""One gateway process for test_auth_two_gateways: an AuthGate on a shared
PostgreSQL that, when told "go" on stdin, admits requests for one key as fast as it
can for a while, then prints how many it admitted as JSON.

    python gate_worker.py DSN KEY SECONDS SYNC_INTERVAL
"""

from __future__ import annotations

import asyncio
import sys
import time

import orjson

from llmgw.auth.gate import AuthGate
from llmgw.config import Settings
from llmgw.errors import RateLimitExceeded
from llmgw.store import Store


async def main(dsn: str, key: str, seconds: float, sync_interval: float) -> None:
    store = await Store.open(dsn)
    gate = AuthGate(Settings(auth={"enabled": True, "store": dsn}), store, sync_interval=sync_interval)
    await gate.start()
    principal = await gate.authenticate(f"Bearer {key}", time.time())
    print("started", flush=True)
    # Ready once it has heard of the other gateway (both have started when told "peer").
    assert (await asyncio.to_thread(sys.stdin.readline)).strip() == "peer"
    while gate.counters.gateways < 2:
        await asyncio.sleep(sync_interval)
    print("ready", flush=True)
    line = await asyncio.to_thread(sys.stdin.readline)
    assert line.strip() == "go", line
    admitted = refused = 0
    started = time.time()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for _ in range(20):
            try:
                gate.admit(principal, 0, time.time())
                admitted += 1
            except RateLimitExceeded:
                refused += 1
        await asyncio.sleep(0)  # let the exchange with the store run, as a server's loop would
    finished = time.time()
    gateways = gate.counters.gateways
    await gate.close()
    await store.close()
    result = {
        "admitted": admitted,
        "refused": refused,
        "started": started,
        "finished": finished,
        "gateways": gateways,
    }
    print(orjson.dumps(result).decode(), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])))
