"""A cache hit's time through a real gateway at concurrency 1, beside the same
request answered by a sim replica (a miss that is not kept, temperature 0.7) and a
cacheable miss.

Run:  .venv/bin/python bench/router/cache_hit_latency.py [-n 300]

Starts `llmgw server` with auth in front of a fast sim (1 ms a token, 4 tokens), makes
a project with caching on through the admin API, and times each request from the
client's side (HTTP/1.1 keep-alive, one request at a time). Prints the median and p99
in milliseconds. Timings are not assertions: this stays out of the test suite.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from llmgw.testing.server import running_gateway
from llmgw.testing.sim import start_sim_engine


def _ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"{statistics.median(ordered) * 1000:.2f} | {p99 * 1000:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=300)
    args = parser.parse_args()
    engine = start_sim_engine("--model", "chat-a", "--decode-ms", "1", "--prefill-ms-per-token", "0.01")
    try:
        with tempfile.TemporaryDirectory() as where:
            config = {
                "auth": {"enabled": True, "store": str(Path(where) / "llmgw.db")},
                "endpoints": [{"id": "sim-1", "url": engine.url, "models": ["chat-a"], "engine": "sim"}],
            }
            with running_gateway(config) as gateway, httpx.Client(timeout=10) as client:
                admin = {"authorization": f"Bearer {gateway.admin_token()}"}

                def call(path: str, body: dict[str, Any], method: str = "POST") -> dict[str, Any]:
                    answer = client.request(method, gateway.admin_url + path, json=body, headers=admin)
                    answer.raise_for_status()
                    data: dict[str, Any] = answer.json()
                    return data

                call("/api/orgs", {"id": "o"})
                call("/api/teams", {"id": "t", "org": "o"})
                call("/api/projects", {"id": "p", "team": "t"})
                key = call("/api/keys", {"project": "p"})["key"]
                call("/api/cache/project/p", {"ttl": "1h"}, "PUT")
                headers = {"authorization": f"Bearer {key}"}
                url = gateway.base_url + "/chat/completions"

                def timed(body: dict[str, Any], expect: str | None) -> float:
                    start = time.perf_counter()
                    answer = client.post(url, json={"model": "chat-a", **body}, headers=headers)
                    took = time.perf_counter() - start
                    assert answer.status_code == 200, answer.text
                    assert answer.headers.get("x-llmgw-cache") == expect, answer.headers
                    return took

                base = {"messages": [{"role": "user", "content": "hello there " * 20}], "max_tokens": 4}
                timed({**base, "temperature": 0}, "miss")
                for _ in range(20):  # warm up both paths
                    timed({**base, "temperature": 0}, "hit")
                    timed({**base, "temperature": 0.7}, None)
                hits, sampled, misses = [], [], []
                for i in range(args.n):
                    hits.append(timed({**base, "temperature": 0}, "hit"))
                    sampled.append(timed({**base, "temperature": 0.7}, None))
                    misses.append(timed({**base, "temperature": 0, "seed": i}, "miss"))
    finally:
        engine.stop()
    print(f"n={args.n} per row, concurrency 1")
    print("| request | median ms | p99 ms |")
    print("|---|---:|---:|")
    print(f"| cache hit | {_ms(hits)} |")
    print(f"| not cacheable (temperature 0.7), answered by the sim | {_ms(sampled)} |")
    print(f"| cacheable miss (a new seed each), answered by the sim and kept | {_ms(misses)} |")


if __name__ == "__main__":
    main()
