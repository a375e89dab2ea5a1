"""Micro benchmark of what a canary adds to one request in process: the split decision
(`Canaries.choose`) and the report of the try's outcome (`Canaries.observed`, which
records it in the window and, on the candidate's side, judges it).

Run:  .venv/bin/python bench/router/micro_canary.py [--quick] [--out bench/results/NAME]

Prints nanoseconds per request, each the best of many short rounds (50 requests: a
round the scheduler interrupted is dropped, as in micro_structures.py) and, with --out,
writes NAME.md and NAME.json. A calibration line gives this machine's cost of an empty
Python function call, so the figures can be scaled to another machine. The budget (issue #21):
under 2 µs per request. Cases: a model without a canary (the cost every other model
pays: one dictionary lookup each), a model with one split by request order, split by
session id, and the candidate's side past min_requests (judged on every try).
Kept out of the test suite on purpose: timings are not assertions.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

import orjson

from llmgw.catalog import Catalog, Model
from llmgw.router.canary import Canaries

_OPS = 50


def _catalog() -> Catalog:
    return Catalog.build(
        [
            Model(name="chat", canary={"model": "chat-next", "percent": 10, "min_requests": 50}),
            Model(name="chat-next"),
            Model(name="plain"),
        ],
        served_statically=("chat", "chat-next", "plain"),
    )


def _best_ns(run: Callable[[], int], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter_ns()
        ops = run()
        best = min(best, (time.perf_counter_ns() - start) / ops)
    return best


def _clock() -> Callable[[], float]:
    # A fake clock advancing 1 ms a call: the window's arithmetic runs as it would in
    # service, without the cost of reading the system clock counted twice.
    now = [0.0]

    def tick() -> float:
        now[0] += 0.001
        return now[0]

    return tick


def _request_path(model: str, sessions: list[str] | None, ops: int) -> Callable[[], int]:
    """`ops` requests of `model`: choose a side, then report a healthy outcome on it."""
    canaries = Canaries(_catalog(), _clock())

    def run() -> int:
        choose, observed = canaries.choose, canaries.observed
        for n in range(ops):
            session = None if sessions is None else sessions[n % len(sessions)]
            side = choose(model, session) or model
            observed(side, error=False, ttft_s=0.05)
        return ops

    return run


def _judged(ops: int) -> Callable[[], int]:
    """The candidate's side past min_requests: every try is recorded and judged (each
    request also makes the split decision, as a candidate's request did)."""
    canaries = Canaries(_catalog(), _clock())
    for _ in range(2000):
        side = canaries.choose("chat", None) or "chat"
        canaries.observed(side, error=False, ttft_s=0.05)

    def run() -> int:
        choose, observed = canaries.choose, canaries.observed
        for _ in range(ops):
            choose("chat", None)
            observed("chat-next", error=False, ttft_s=0.05)
        return ops

    return run


def _empty() -> None:
    return None


def _calibration(ops: int) -> Callable[[], int]:
    """An empty function call: this machine's unit of Python work."""

    def run() -> int:
        call = _empty
        for _ in range(ops):
            call()
        return ops

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--out", type=Path, help="write OUT.md and OUT.json")
    args = parser.parse_args()
    rounds = 100 if args.quick else 2000
    sessions = [f"conversation-{i:06d}-user-{i * 7919 % 100_000}" for i in range(1000)]
    cases = {
        "model without a canary (choose + observed)": _request_path("plain", None, _OPS),
        "canary, split by request (choose + observed)": _request_path("chat", None, _OPS),
        "canary, split by session id (choose + observed)": _request_path("chat", sessions, _OPS),
        "candidate past min_requests (choose + observed + judge)": _judged(_OPS),
        "calibration: empty Python function call": _calibration(_OPS),
    }
    results = {name: round(_best_ns(run, rounds), 1) for name, run in cases.items()}
    command = "python bench/router/micro_canary.py" + (" --quick" if args.quick else "")
    header = (
        f"{platform.python_implementation()} {platform.python_version()} on {platform.machine()}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}"
    )
    lines = [f"`{command}` — {header}", "", "| case | ns per request |", "|---|---|"]
    lines += [f"| {name} | {ns:.0f} |" for name, ns in results.items()]
    text = "\n".join(lines)
    print(text)
    if args.out is not None:
        args.out.with_suffix(".md").write_text(
            "# Canary: what the split and its window add to a request, in process\n\n"
            + text
            + "\n\nBudget (issue #21): under 2,000 ns per request. Best of "
            + f"{rounds} rounds of {_OPS} requests each.\n"
        )
        args.out.with_suffix(".json").write_bytes(
            orjson.dumps(
                {"command": command, "machine": header, "ns_per_request": results}, option=orjson.OPT_INDENT_2
            )
        )
    sys.exit(0)


if __name__ == "__main__":
    main()
