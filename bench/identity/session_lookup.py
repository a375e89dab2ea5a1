"""How long `SessionManager.signed_in(headers)` takes to say who a browser request is:
from the in-process cache (what nearly every request gets), and, as the baseline in the
same run, read from the store (what a request gets once its cached answer is
`auth.cache_ttl` old, or when nothing is cached), plus the floor (hashing the token and
a dict lookup, no manager at all).

A SQLite store in a temporary folder with `--sessions` people each signed in once;
every lookup picks a session at random and goes through the same call a route makes
(cookie parsed from the headers, token hashed, cache or store). Each lookup is timed
alone (perf_counter_ns), in `--rounds` rounds of `-n` lookups; the figures are the
rounds' medians.

    .venv/bin/python bench/identity/session_lookup.py [-n 20000] [--rounds 5] [--sessions 200]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import random
import statistics
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from llmgw.config.auth import Session
from llmgw.identity.sessions import COOKIE, SessionManager
from llmgw.store import Store
from llmgw.store.people import Person


class Headers:
    def __init__(self, cookie: str) -> None:
        self._cookie = cookie

    def get(self, name: str, /) -> str | None:
        return self._cookie if name == "cookie" else None


# Each read from the store is several statements and a write (the last use): a few hundred
# per round measure it well enough, and thousands would take minutes.
STORE_LOOKUPS = 200
RULES = Session(lifetime=timedelta(hours=12), idle=timedelta(hours=2))


def _summary(samples_ns: list[int]) -> dict[str, float]:
    ordered = sorted(samples_ns)
    return {
        "mean_us": statistics.fmean(ordered) / 1000,
        "p50_us": ordered[len(ordered) // 2] / 1000,
        "p99_us": ordered[int(len(ordered) * 0.99)] / 1000,
    }


async def _time(manager: SessionManager, headers: list[Headers], n: int) -> list[int]:
    samples = []
    for _ in range(n):
        h = random.choice(headers)
        start = time.perf_counter_ns()
        who = await manager.signed_in(h)
        samples.append(time.perf_counter_ns() - start)
        assert who is not None
    return samples


def _floor(tokens: list[str], n: int) -> list[int]:
    table = {hashlib.sha256(t.encode()).hexdigest(): t for t in tokens}
    samples = []
    for _ in range(n):
        token = random.choice(tokens)
        start = time.perf_counter_ns()
        found = table.get(hashlib.sha256(token.encode()).hexdigest())
        samples.append(time.perf_counter_ns() - start)
        assert found is not None
    return samples


async def main(n: int, rounds: int, sessions: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        store = await Store.open(str(Path(folder) / "llmgw.db"))
        try:
            cached = SessionManager(store, RULES, cache_ttl_s=30.0)
            uncached = SessionManager(store, RULES, cache_ttl_s=0.0)
            tokens = []
            for i in range(sessions):
                await store.people.create(Person(id=f"person-{i}", email=f"p{i}@example.com"), time.time())
                tokens.append((await cached.start(f"person-{i}"))[0])
            headers = [Headers(f"theme=dark; {COOKIE}={t}") for t in tokens]
            await _time(cached, headers, sessions * 2)  # every session cached
            results: dict[str, list[dict[str, float]]] = {"floor": [], "cached": [], "store": []}
            for _ in range(rounds):
                results["floor"].append(_summary(_floor(tokens, n)))
                results["cached"].append(_summary(await _time(cached, headers, n)))
                results["store"].append(_summary(await _time(uncached, headers, STORE_LOOKUPS)))
        finally:
            await store.close()
    print(f"{'path':<8} {'mean µs':>9} {'p50 µs':>9} {'p99 µs':>9}   (median of {rounds} rounds)")
    for path, runs in results.items():
        row = {k: statistics.median(r[k] for r in runs) for k in ("mean_us", "p50_us", "p99_us")}
        print(f"{path:<8} {row['mean_us']:>9.2f} {row['p50_us']:>9.2f} {row['p99_us']:>9.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=20_000, help="lookups per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sessions", type=int, default=200)
    args = parser.parse_args()
    asyncio.run(main(args.n, args.rounds, args.sessions))
