"""Two gateway processes sharing one PostgreSQL hold a limit together.

Each process runs an AuthGate (the seam the request path calls) and admits requests
for the same key as fast as it can; the key's project allows N a minute. Counted per
process, they would admit 2N. Together they admit N, give or take what the limiter
allows for: at most G-1 = 1 over (the first request after an exchange is judged
alone), and the previous minute's share when the run crosses a minute boundary (the
window slides); at least N-2, as the shares converge within a few exchanges.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import orjson
from auth_store_helpers import make_key, make_tree, opened

WORKER = Path(__file__).with_name("gate_worker.py")
LIMIT = 200
RUN_S = 2.0
SYNC_INTERVAL_S = 0.05
NOW = 1_800_000_000.0


def expect(workers: list[subprocess.Popen[str]], word: str) -> None:
    for worker in workers:
        assert worker.stdout is not None
        line = worker.stdout.readline().strip()
        assert line == word, worker.stderr.read() if worker.stderr else line


def tell(workers: list[subprocess.Popen[str]], word: str) -> None:
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write(word + "\n")
        worker.stdin.flush()


def test_two_processes_hold_one_limit(postgres_location: str) -> None:
    async def setup() -> str:
        async with opened(postgres_location) as store:
            await make_tree(store, project={"rpm": LIMIT})
            key: str = await make_key(store, NOW)
            return key

    key = asyncio.run(setup())
    command = [sys.executable, str(WORKER), postgres_location, key, str(RUN_S), str(SYNC_INTERVAL_S)]
    workers = [
        subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    try:
        expect(workers, "started")
        tell(workers, "peer")  # both are in the store now; each waits to hear of the other
        expect(workers, "ready")
        tell(workers, "go")
        results = []
        for worker in workers:
            out, err = worker.communicate(timeout=60)
            assert worker.returncode == 0, err
            results.append(orjson.loads(out.strip().splitlines()[-1]))
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
    total = sum(r["admitted"] for r in results)
    assert all(r["gateways"] == 2 for r in results)
    assert all(r["refused"] > 0 for r in results)  # both were pushing past the limit
    started = min(r["started"] for r in results)
    finished = max(r["finished"] for r in results)
    crossed_minute = int(started // 60) != int(finished // 60)
    slack = LIMIT * (finished - started) / 60 if crossed_minute else 0
    assert LIMIT - 2 <= total <= LIMIT + 1 + slack, results
