"""Micro benchmark of the response cache on the request path: what a miss, a hit's
lookup and a request that is not cacheable each add.

Run:  .venv/bin/python bench/router/micro_cache.py [-n 20000] [--rounds 7]

The budget: a cacheable miss (the repeatability test, the canonical key and the
lookup) under 5 µs for a chat body of a few turns. Prints the best round's µs per
operation and the median, since the machine is shared. Timings are not assertions, so
this stays out of the test suite.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import orjson

from llmgw.router.cache_key import cache_key, cacheable
from llmgw.router.request import Kind, parse_request
from llmgw.router.response_cache import ResponseCache

ROUTE = b"/v1/chat/completions"


def _body(turns: int, chars: int, temperature: float) -> dict[str, Any]:
    messages = [{"role": "system", "content": "You are a careful assistant. " * 4}]
    for i in range(turns):
        messages.append({"role": "user" if i % 2 == 0 else "assistant", "content": "word " * (chars // 5)})
    return {
        "model": "chat-a",
        "messages": messages,
        "temperature": temperature,
        "max_tokens": 256,
        "user": "someone",
        "metadata": {"run": "bench"},
    }


def _us_per_op(run: Callable[[], object], n: int, rounds: int) -> tuple[float, float]:
    results = []
    for _ in range(rounds):
        start = time.perf_counter_ns()
        for _ in range(n):
            run()
        results.append((time.perf_counter_ns() - start) / n / 1000)
    return min(results), statistics.median(results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    cache = ResponseCache(128 << 20, 1 << 20)
    rows: list[tuple[str, float, float]] = []
    for label, turns, chars in (
        ("small chat (1 turn, 100 B)", 1, 100),
        ("chat (6 turns, ~2 KB)", 6, 330),
        ("long chat (10 turns, ~8 KB)", 10, 800),
    ):
        # The request as the gateway holds it: decoded once already, by parse_request.
        request = parse_request(Kind.CHAT, orjson.dumps(_body(turns, chars, 0)))
        body = request.body
        # Filled so that lookups land in a large dictionary, as in a busy gateway.
        for i in range(20000):
            cache.put(i.to_bytes(8, "big"), "application/json", (b"x" * 100,), "chat-a", 600)

        def miss(body: dict[str, Any] = body) -> None:
            if cacheable(body):
                cache.get(cache_key("proj", ROUTE, "chat-a", False, False, body))

        rows.append((f"miss: {label}", *_us_per_op(miss, args.n, args.rounds)))
        key = cache_key("proj", ROUTE, "chat-a", False, False, body)
        cache.put(key, "application/json", (b"y" * 600,), "chat-a", 600)

        def hit(body: dict[str, Any] = body) -> None:
            if cacheable(body):
                cache.get(cache_key("proj", ROUTE, "chat-a", False, False, body))

        rows.append((f"hit lookup: {label}", *_us_per_op(hit, args.n, args.rounds)))
    sampled = parse_request(Kind.CHAT, orjson.dumps(_body(6, 330, 0.7))).body
    rows.append(
        (
            "not cacheable (temperature 0.7)",
            *_us_per_op(lambda: cacheable(sampled), args.n, args.rounds),
        )
    )
    print(f"python {platform.python_version()} on {platform.machine()}, n={args.n}, rounds={args.rounds}")
    print("| operation | min µs | median µs |")
    print("|---|---:|---:|")
    for label, low, mid in rows:
        print(f"| {label} | {low:.2f} | {mid:.2f} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
