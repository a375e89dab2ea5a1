"""Micro-benchmark of the KV index's lookup: a 4,096-block prompt against an index of
several replicas' blocks, best of repeats.

    .venv/bin/python bench/kv/micro_lookup.py --out bench/results/kv-index-lookup
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import time
from pathlib import Path

from llmgw.protocol.kv_events import Batch, Stored
from llmgw.router.kv_index import KVIndex


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--blocks", type=int, default=4096)
    ap.add_argument("--replicas", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    rng = random.Random(7)
    idx = KVIndex()
    prompt = [rng.getrandbits(64) for _ in range(args.blocks)]
    # Every replica holds a different leading share of the prompt plus unrelated blocks.
    for r in range(args.replicas):
        held = prompt[: args.blocks * (r + 1) // args.replicas]
        noise = tuple(rng.getrandbits(64) for _ in range(args.blocks))
        idx.apply(f"r{r}", Batch(seq=0, ts=0.0, events=(Stored(tuple(held) + noise, None),)))
    cases = {
        "all replicas match, depths 512..4,096 (binary search)": prompt,
        "miss at block 0": [1, *prompt[1:]],
    }
    rows = []
    for name, keys in cases.items():
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            idx.leading(keys)
            times.append(time.perf_counter() - t0)
        times.sort()
        rows.append((name, times[0] * 1e6, times[len(times) // 2] * 1e6, times[int(len(times) * 0.99)] * 1e6))
    cmd = " ".join(["python", *sys.argv])
    md = [
        f"`{cmd}`",
        "",
        f"{args.replicas} replicas, {len(idx)} distinct blocks indexed, prompt of {args.blocks} blocks; "
        f"{args.repeats} lookups per case; Python {platform.python_version()} on {platform.machine()}.",
        "",
        "| case | best µs | median µs | p99 µs |",
        "|---|---|---|---|",
        *[f"| {n} | {b:.1f} | {m:.1f} | {p:.1f} |" for n, b, m, p in rows],
    ]
    print("\n".join(md))
    if args.out is not None:
        args.out.with_suffix(".md").write_text("\n".join(md) + "\n")
        args.out.with_suffix(".json").write_text(
            json.dumps(
                [{"case": n, "best_us": b, "median_us": m, "p99_us": p} for n, b, m, p in rows], indent=2
            )
        )


if __name__ == "__main__":
    main()
