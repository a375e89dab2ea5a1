"""Micro benchmark of the router's pure structures: what each costs per request.

Run:  .venv/bin/python bench/router/micro_structures.py [--quick]

Prints nanoseconds per operation (best of several rounds, so noise from other processes
inflates less). The budget: the whole routing decision well under 30 µs for 8 replicas
and prompts of a few KB, the prefix tree's match + insert of a 4 KB prompt under about
20 µs amortised. Kept out of the test suite on purpose: timings are not assertions.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import sys
import time
from collections import Counter, deque
from collections.abc import Callable

from llmgw.router.affinity import SessionAffinity
from llmgw.router.balance import imbalanced, session_holds
from llmgw.router.breaker import Breaker
from llmgw.router.prefix_tree import PrefixTree

REPLICAS = [f"http://10.0.0.{i}:8000" for i in range(8)]
# Common English words, from which the benchmark's prompts are strung together.
_VOCABULARY = (
    "the of and to in is you that it he was for on are as with his they at be this have from or one had"
    " by word but not what all were we when your can said there use an each which she do how their if"
    " will up other about out many then them these so some her would make like him into time has look"
)
_WORDS = tuple(_VOCABULARY.split())


def _prose(rng: random.Random, chars: int) -> str:
    out: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(_WORDS)
        out.append(word)
        size += len(word) + 1
    return " ".join(out)[:chars]


def _best_ns_per_op(run: Callable[[], int], rounds: int) -> float:
    """`run` does some operations and returns how many; the best round's ns per op."""
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter_ns()
        ops = run()
        best = min(best, (time.perf_counter_ns() - start) / ops)
    return best


class _Chat:
    """Multi-turn chat traffic: a few system prompts, sessions whose prompt grows by a
    turn each request, about 4 KB once warmed up, each session tied to a replica."""

    def __init__(self, rng: random.Random, sessions: int, prompt_chars: int) -> None:
        systems = [_prose(rng, prompt_chars // 2) for _ in range(4)]
        self.rng = rng
        self.prompts = [rng.choice(systems) for _ in range(sessions)]
        self.turn_chars = max(64, prompt_chars // 8)
        self.prompt_chars = prompt_chars

    def next(self) -> tuple[int, str]:
        s = self.rng.randrange(len(self.prompts))
        prompt = self.prompts[s] + _prose(self.rng, self.turn_chars)
        if len(prompt) > self.prompt_chars * 3 // 2:
            prompt = prompt[: self.prompt_chars // 2] + prompt[-self.prompt_chars // 2 :]  # new chat
        self.prompts[s] = prompt
        return s, prompt


def _replay(tree: PrefixTree, traffic: list[tuple[int, str]], warm: int, rounds: int, requests: int) -> float:
    """Match then insert each prompt with one walk, as the router does; `warm` requests go in untimed."""
    feed = iter(traffic)
    clock = [0.0]

    def round_() -> int:
        for _ in range(requests):
            s, prompt = next(feed)
            clock[0] += 0.001
            walk = tree.walk(prompt)
            walk.match(clock[0])
            walk.insert(REPLICAS[s % 8], clock[0])
        return requests

    for _ in range(warm // requests):
        round_()
    return _best_ns_per_op(round_, rounds)


def bench_tree(rounds: int, requests: int) -> dict[str, float]:
    rng = random.Random(7)
    results: dict[str, float] = {}
    warm = 4000
    needed = warm + requests * rounds

    # Chat traffic, with a tree large enough to hold the working set, then squeezed.
    chat = _Chat(rng, sessions=200, prompt_chars=4096)
    traffic = [chat.next() for _ in range(needed)]
    tree = PrefixTree(max_nodes=100_000, ttl=300.0)
    results["tree match+insert, chat ~4 KB, roomy"] = _replay(tree, traffic, warm, rounds, requests)
    results["  (mean prompt chars)"] = sum(len(p) for _, p in traffic) / len(traffic)
    results["  (nodes after)"] = float(len(tree))
    small = PrefixTree(max_nodes=300, ttl=300.0)
    results["tree match+insert, chat ~4 KB, evicting (300 nodes)"] = _replay(
        small, traffic, warm, rounds, requests
    )

    # The next requests of the same conversations, matched without being inserted.
    upcoming = [chat.next()[1] for _ in range(requests)]

    def match_round() -> int:
        for prompt in upcoming:
            tree.match(prompt, 100.0)
        return requests

    results["tree match only, chat ~4 KB"] = _best_ns_per_op(match_round, rounds)

    # Unrelated 4 KB prompts: every insert a new leaf, and past the bound an eviction.
    block = _prose(rng, 1 << 16)
    distinct = []
    for i in range(needed):
        start = rng.randrange(len(block) - 4096)
        distinct.append((i, f"{i:08x}" + block[start : start + 4088]))
    spread = PrefixTree(max_nodes=1000, ttl=300.0)
    results["tree match+insert, distinct 4 KB, evicting"] = _replay(spread, distinct, warm, rounds, requests)

    # The same 4 KB prompt again and again: one full-edge compare per call.
    same = [(0, block[:4096])] * needed
    hot = PrefixTree(max_nodes=1000, ttl=300.0)
    results["tree match+insert, identical 4 KB"] = _replay(hot, same, warm, rounds, requests)
    return results


def bench_small_structures(rounds: int, requests: int) -> dict[str, float]:
    results: dict[str, float] = {}
    breakers = {r: Breaker(failure_threshold=3, cooldown=30.0) for r in REPLICAS}

    def breaker_round() -> int:
        now = 1.0
        for _ in range(requests):
            now += 0.001
            up = [r for r in REPLICAS if breakers[r].available(now)]
            b = breakers[up[0]]
            b.begin(now)
            b.succeeded()
        return requests

    results["breakers: available x8 + begin + succeeded"] = _best_ns_per_op(breaker_round, rounds)

    table = SessionAffinity(max_sessions=100_000, ttl=600.0)
    sessions = [f"session-{i}" for i in range(150_000)]
    for i, s in enumerate(sessions[:100_000]):
        table.set(s, REPLICAS[i % 8], 0.0)

    def affinity_round() -> int:
        now = 1.0
        for i in range(requests):
            now += 0.001
            s = sessions[(i * 7919) % len(sessions)]
            table.get(s, now)
            table.set(s, REPLICAS[i % 8], now)
        return requests

    results["affinity: get + set (100k sessions, at the bound)"] = _best_ns_per_op(affinity_round, rounds)

    loads = [3.0, 7.0, 0.0, 12.0, 5.0, 5.0, 9.0, 1.0]

    def balance_round() -> int:
        for _ in range(requests):
            imbalanced(loads, 32.0, 1.5)
            session_holds(7.0, 0.0, 1.5)
        return requests

    results["balance: imbalanced(8 loads) + session_holds"] = _best_ns_per_op(balance_round, rounds)
    return results


def bench_decision(rounds: int, requests: int) -> dict[str, float]:
    """A whole cache-aware decision as the router would make it, around the structures:
    session lookup, breaker filter, load guards, prefix match, pick, and the bookkeeping.
    Half the conversations carry a session id; 16 requests are in flight at any time, so
    loads move and each guard gets its turn."""
    rng = random.Random(11)
    warm = 4000
    chat = _Chat(rng, sessions=200, prompt_chars=4096)
    traffic = [chat.next() for _ in range(warm + requests * rounds)]
    tree = PrefixTree(max_nodes=100_000, ttl=300.0)
    table = SessionAffinity(max_sessions=10_000, ttl=600.0)
    breakers = {r: Breaker(failure_threshold=3, cooldown=30.0) for r in REPLICAS}
    load = dict.fromkeys(REPLICAS, 0.0)
    in_flight: deque[str] = deque()
    clock = [0.0]
    feed = iter(traffic)
    paths = Counter[str]()

    def decide(session: str | None, prompt: str, now: float) -> str:
        up = [r for r in REPLICAS if breakers[r].available(now)]
        least = min(up, key=load.__getitem__)
        held = table.get(session, now) if session is not None else None
        if held is not None and held in up and session_holds(load[held], load[least], 1.5):
            choice, path = held, "session"
        elif imbalanced([load[r] for r in up], 32.0, 1.5):
            choice, path = least, "least-loaded"
        else:
            found = tree.match(prompt, now)
            if found.longest * 2 > len(prompt):
                best = found.by_endpoint
                choice = max((r for r in up if r in best), key=best.__getitem__, default=least)
                path = "prefix"
            else:
                choice, path = min(up, key=tree.size_of), "smallest-tree"
        paths[path] += 1
        tree.insert(prompt, choice, now)
        if session is not None:
            table.set(session, choice, now)
        breakers[choice].begin(now)
        return choice

    def decision_round() -> int:
        for _ in range(requests):
            s, prompt = next(feed)
            clock[0] += 0.001
            choice = decide(f"s{s}" if s % 2 else None, prompt, clock[0])
            load[choice] += 1
            in_flight.append(choice)
            if len(in_flight) > 16:
                done = in_flight.popleft()
                load[done] -= 1
                breakers[done].succeeded()
        return requests

    for _ in range(warm // requests):
        decision_round()
    paths.clear()
    result = {"whole decision: 8 replicas, chat ~4 KB": _best_ns_per_op(decision_round, rounds)}
    total = sum(paths.values())
    for path, count in paths.most_common():
        result[f"  (share decided by {path}, %)"] = 100.0 * count / total
    return result


def _calibration(rounds: int) -> dict[str, float]:
    """What this machine takes for the primitives, so figures can be scaled to another."""
    text = _prose(random.Random(3), 4096)
    twin = text[:-1] + text[-1]  # an equal string, not the same object

    def call_round() -> int:
        noop = _noop
        for _ in range(10_000):
            noop()
        return 10_000

    def compare_round() -> int:
        for _ in range(10_000):
            text.startswith(twin, 0)
        return 10_000

    return {
        "calibration: empty Python function call": _best_ns_per_op(call_round, rounds),
        "calibration: str.startswith, 4 KB equal": _best_ns_per_op(compare_round, rounds),
    }


def _noop() -> None:
    pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds, for a smoke run")
    args = parser.parse_args()
    rounds, requests = (3, 50) if args.quick else (200, 50)
    print(f"python {platform.python_version()} ({sys.implementation.name}) on {platform.machine()}")
    print(f"best of {rounds} rounds x {requests} operations, load average {os.getloadavg()[0]:.1f}\n")
    for name, value in _calibration(rounds).items():
        print(f"{name:<58} {value:>10.0f} ns/op")
    print()
    for results in (
        bench_tree(rounds, requests),
        bench_small_structures(rounds, requests),
        bench_decision(rounds, requests),
    ):
        for name, value in results.items():
            unit = "" if name.startswith("  (") else " ns/op"
            print(f"{name:<58} {value:>10.0f}{unit}")


if __name__ == "__main__":
    main()
