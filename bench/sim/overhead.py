"""How much the sim's own overhead distorts the latencies it simulates.

A sim engine runs in its own process; this process sends it streaming chats and
records, per request, the time to the first content chunk and the mean time between
chunks. The sim reports what it simulated for the same requests (`GET /sim/requests`):
the simulated TTFT and inter-token time, and when its HTTP layer actually handed the
first and last token to the socket. Two distortions follow:

- served: the sim's own lateness, its first/last write against the simulated times;
- client: what this client sees, which adds the loopback and the client's own overhead
  on the same machine (so it is an upper bound on the sim's share).

Load shapes (`--mode`):
- open (default): Poisson arrivals at the rate that keeps `load` streams running on
  average (Little's law over the cost model), as a routing benchmark drives replicas;
- closed: `load` workers start together and each sends its requests back to back. With
  equal requests they stay in lock-step, so arrivals come in bursts of `load`: a stress
  case, reported separately.

Usage:
    python bench/sim/overhead.py --loads 50,100,200 --out bench/results/sim-overhead.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from llmgw.sim.cost import CostModel
from llmgw.sim.options import SimOptions
from llmgw.testing.sim import SimEngineProcess, start_sim_engine

_WORD_TEXT = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma"
WORDS = _WORD_TEXT.split()


@dataclass
class Observed:
    """One request as the client saw it."""

    response_id: str
    ttft_s: float
    itl_mean_s: float
    chunks: int


def prompt(run: int, n: int, words: int) -> str:
    """A prompt unique from its first token, so no prefix-cache hit blurs prefill times."""
    body = " ".join(WORDS[(n * 7 + i) % len(WORDS)] for i in range(words))
    return f"r{run}n{n}: {body}"


async def one_request(
    session: aiohttp.ClientSession, url: str, run: int, n: int, args: argparse.Namespace
) -> Observed:
    body = {
        "model": "sim-model",
        "messages": [{"role": "user", "content": prompt(run, n, args.prompt_words)}],
        "max_tokens": args.max_tokens,
        "stream": True,
    }
    started = time.perf_counter()
    first = last = 0.0
    chunks = 0
    response_id = ""
    async with session.post(url + "/v1/chat/completions", json=body) as response:
        response.raise_for_status()
        async for line in response.content:
            if not line.startswith(b"data: {") or b'"content":"' not in line or b'"content":""' in line:
                continue
            now = time.perf_counter()
            if not chunks:
                first = now
                response_id = json.loads(line[6:])["id"]
            last = now
            chunks += 1
    itl = (last - first) / (chunks - 1) if chunks > 1 else 0.0
    return Observed(response_id, first - started, itl, chunks)


def expected_duration_s(load: int, prompt_tokens: int, args: argparse.Namespace) -> float:
    """A request's simulated duration with `load` streams running, from the cost model."""
    o = SimOptions()
    cost = CostModel(o.prefill_ms_per_token, o.decode_ms, o.decode_ms_per_seq, args.time_scale)
    return cost.prefill_s(prompt_tokens) + (args.max_tokens - 1) * cost.decode_step_s(load)


async def open_loop(session: aiohttp.ClientSession, url: str, run: int, load: int,
                    args: argparse.Namespace, prompt_tokens: int) -> list[Observed]:  # fmt: skip
    rate = load / expected_duration_s(load, prompt_tokens, args)
    rng = random.Random(args.seed + run)
    count = args.requests_per_stream * load
    started = time.perf_counter()
    at = 0.0
    tasks = []
    for n in range(count):
        at += rng.expovariate(rate)
        delay = started + at - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one_request(session, url, run, n, args)))
    return list(await asyncio.gather(*tasks))


async def closed_loop(session: aiohttp.ClientSession, url: str, run: int, load: int,
                      args: argparse.Namespace) -> list[Observed]:  # fmt: skip
    async def worker(w: int) -> list[Observed]:
        n0 = w * args.requests_per_stream
        return [await one_request(session, url, run, n0 + i, args) for i in range(args.requests_per_stream)]

    batches = await asyncio.gather(*(worker(w) for w in range(load)))
    return [o for batch in batches for o in batch]


def cpu_seconds(pid: int) -> tuple[float, float]:
    """CPU time a process ran, and time it waited runnable for a CPU (Linux schedstat)."""
    ran = waited = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        on_cpu, on_queue, _ = (task / "schedstat").read_text().split()
        ran += int(on_cpu)
        waited += int(on_queue)
    return ran / 1e9, waited / 1e9


def relative(observed: list[float], simulated: list[float]) -> dict[str, float]:
    """Distortion of `observed` against `simulated`, in percent."""
    per_request = sorted((o - s) / s * 100 for o, s in zip(observed, simulated, strict=True) if s > 0)
    return {
        "mean_of_totals_pct": round((sum(observed) / sum(simulated) - 1) * 100, 3),
        "p50_pct": round(statistics.median(per_request), 3),
        "p95_pct": round(per_request[int(0.95 * (len(per_request) - 1))], 3),
    }


async def run_load(sim: SimEngineProcess, run: int, load: int, args: argparse.Namespace,
                   prompt_tokens: int) -> dict[str, Any]:  # fmt: skip
    connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=60)
    async with aiohttp.ClientSession(
        timeout=aiohttp.ClientTimeout(total=600), connector=connector
    ) as session:

        async def warm() -> None:
            async with session.get(sim.url + "/health") as response:
                await response.read()

        # Open the connections before the clock starts, as a router's pool has them open.
        await asyncio.gather(*(warm() for _ in range(load)))
        await asyncio.sleep(0.3)
        samples: list[int] = []

        async def sample_running() -> None:
            while True:  # cancelled when the load is done
                await asyncio.sleep(0.25)
                async with session.get(sim.url + "/sim/state") as response:
                    samples.append(int((await response.json())["running"]))

        sampler = asyncio.create_task(sample_running())
        (ran0, waited0), wall0 = cpu_seconds(sim.pid), time.perf_counter()
        if args.mode == "open":
            observed_list = await open_loop(session, sim.url, run, load, args, prompt_tokens)
        else:
            observed_list = await closed_loop(session, sim.url, run, load, args)
        wall = time.perf_counter() - wall0
        sampler.cancel()
        await asyncio.gather(sampler, return_exceptions=True)
        ran1, waited1 = cpu_seconds(sim.pid)
        async with session.get(sim.url + f"/sim/requests?limit={len(observed_list)}") as response:
            simulated = {r["id"]: r for r in (await response.json())["requests"]}
    observed = {o.response_id: o for o in observed_list}
    rows = [(observed[i], simulated[i]) for i in observed if i in simulated]
    if len(rows) != len(observed):
        raise RuntimeError(f"the sim reported {len(rows)} of {len(observed)} requests")
    sim_ttft = [s["ttft_s"] for _, s in rows]
    sim_itl = [s["itl_mean_s"] for _, s in rows]
    busy = sum(s["last_token_at"] - s["arrived_at"] for _, s in rows)
    return {
        "streams_target": load,
        "streams_mean": round(busy / wall, 1),
        "streams_median_sampled": statistics.median(samples) if samples else None,
        "streams_max_sampled": max(samples, default=None),
        "requests": len(rows),
        "tokens": sum(o.chunks for o, _ in rows),
        "wall_s": round(wall, 2),
        "sim_cpu_pct": round((ran1 - ran0) / wall * 100, 1),
        "sim_cpu_wait_pct": round((waited1 - waited0) / wall * 100, 1),
        "simulated_ttft_mean_ms": round(statistics.fmean(sim_ttft) * 1000, 2),
        "simulated_itl_mean_ms": round(statistics.fmean(sim_itl) * 1000, 2),
        "served_ttft": relative([s["first_write_at"] - s["arrived_at"] for _, s in rows], sim_ttft),
        "served_itl": relative(
            [(s["last_write_at"] - s["first_write_at"]) / (s["completion_tokens"] - 1) for _, s in rows],
            sim_itl,
        ),
        "client_ttft": relative([o.ttft_s for o, _ in rows], sim_ttft),
        "client_itl": relative([o.itl_mean_s for o, _ in rows], sim_itl),
    }


def markdown(result: dict[str, Any]) -> str:
    lines = [
        f"Load shape: {result['mode']}; prompt {result['prompt_tokens']} tokens, "
        f"answer {result['max_tokens']} tokens; sim {' '.join(result['sim_args'])}.\n",
        "| streams (target / mean / median / max) | requests | sim CPU % | sim waiting for CPU % "
        "| simulated TTFT ms | simulated ITL ms | served TTFT Δ% mean / p50 / p95 | served ITL Δ% mean / p95 "
        "| client TTFT Δ% mean / p95 | client ITL Δ% mean / p95 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["loads"]:
        served = r["served_ttft"]
        lines.append(
            f"| {r['streams_target']} / {r['streams_mean']} / {r['streams_median_sampled']} "
            f"/ {r['streams_max_sampled']} | {r['requests']} | {r['sim_cpu_pct']} "
            f"| {r['sim_cpu_wait_pct']} | {r['simulated_ttft_mean_ms']} | {r['simulated_itl_mean_ms']} "
            f"| {served['mean_of_totals_pct']:+.2f} / {served['p50_pct']:+.2f} / {served['p95_pct']:+.2f} "
            f"| {r['served_itl']['mean_of_totals_pct']:+.2f} / {r['served_itl']['p95_pct']:+.2f} "
            f"| {r['client_ttft']['mean_of_totals_pct']:+.2f} / {r['client_ttft']['p95_pct']:+.2f} "
            f"| {r['client_itl']['mean_of_totals_pct']:+.2f} / {r['client_itl']['p95_pct']:+.2f} |"
        )
    return "\n".join(lines) + "\n"


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    sim_args = ["--max-seqs", str(args.max_seqs), "--time-scale", str(args.time_scale), *args.sim_arg]
    results = []
    with start_sim_engine(*sim_args) as sim:
        if args.client_nice:
            # The client is the measuring instrument: on a small machine it competes with
            # the sim for CPU, so it yields first (the sim, started above, keeps its priority).
            os.nice(args.client_nice)
        async with aiohttp.ClientSession() as session:
            messages = [{"role": "user", "content": prompt(0, 0, args.prompt_words)}]
            async with session.post(sim.url + "/tokenize", json={"messages": messages}) as response:
                prompt_tokens = int((await response.json())["count"])
        # A warm-up run, not recorded: first requests pay for imports and cold caches.
        await run_load(sim, 0, 10, args, prompt_tokens)
        loads = [int(x) for x in args.loads.split(",")]
        for run, load in enumerate((n for n in loads for _ in range(args.repeat)), start=1):
            results.append(await run_load(sim, run, load, args, prompt_tokens))
            print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    return {
        "benchmark": "sim overhead",
        "command": " ".join(["python", *sys.argv]),
        "client_nice": args.client_nice,
        "mode": args.mode,
        "sim_args": sim_args,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        },
        "prompt_tokens": prompt_tokens,
        "max_tokens": args.max_tokens,
        "requests_per_stream": args.requests_per_stream,
        "loads": results,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--loads", default="50,100,200", help="concurrent streams, comma-separated")
    parser.add_argument("--mode", choices=["open", "closed"], default="open")
    parser.add_argument("--requests-per-stream", type=int, default=3, help="requests = this x streams")
    parser.add_argument("--repeat", type=int, default=1, help="runs per load (each its own row)")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--prompt-words", type=int, default=120)
    parser.add_argument("--max-seqs", type=int, default=256, help="so every stream runs: no queueing")
    parser.add_argument("--time-scale", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=1, help="seed of the arrival times")
    parser.add_argument(
        "--sim-arg", action="append", default=[], help="extra sim-engine argument (repeatable)"
    )
    parser.add_argument("--out", type=Path, help="write the JSON here, and the table beside it as .md")
    parser.add_argument(
        "--client-nice",
        type=int,
        default=10,
        help="lower this client's CPU priority so it disturbs the sim less (0: leave it)",
    )
    args = parser.parse_args()
    result = asyncio.run(main_async(args))
    table = markdown(result)
    print(table)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
        args.out.with_suffix(".md").write_text(f"Command: `{result['command']}`\n\n" + table)


if __name__ == "__main__":
    main()
