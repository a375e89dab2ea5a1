"""Routing quality on sim replicas: time to first token when groups share system prompts.

A workload after llm-d's published prefix-cache benchmark (groups of users sharing long
system prompts, the replicas' KV capacity holding the working set of prefixes at ~72 %),
scaled to four sim replicas on this machine (README.md says how), is sent open loop to
each target in turn: llmgw with the prefix tree, llmgw round robin, vLLM router
cache_aware, vLLM router round_robin; then again in the reverse order (`--rounds`). Each
run gets four FRESH sims (cold caches, same seeds) and the identical seeded request
sequence; the warm-up is excluded from the figures. Results: per target p50/p90/p99
TTFT, throughput, errors, the sims' prefix-cache hit rate, where each group's requests
went, and the two ratios the issue asks for.

Usage (from the repository root; needs the project's .venv and, for the vLLM router,
`bash bench/router/setup.sh`):
    .venv/bin/python bench/routing/quality.py            # the recorded run (~22 min)
    .venv/bin/python bench/routing/quality.py --quick    # a smoke run (~4 min), not recorded
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import math
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(1, str(ROOT / "bench" / "router"))

from analysis import analyse, pooled  # noqa: E402
from client import drive  # noqa: E402
from gateways import (  # noqa: E402
    GATEWAYS,
    Gateway,
    labelled_values,
    metric_values,
    metrics_page,
    wait_ready,
)
from procs import Proc, StartError, core_times, port_is_free  # noqa: E402
from render import markdown, write  # noqa: E402
from replicas import MODEL, SIM_PORTS, Replicas, SimCosts, post_json  # noqa: E402
from workload import BLOCK_SIZE, Schedule, Shape, build  # noqa: E402

BENCH_VENV = ROOT / ".cache" / "bench-venv"
GATEWAY_CORE, LOAD_CORE = 0, 1
LLMGW_COUNTERS = (
    "llmgw_requests_total",
    "llmgw_retries_total",
    "llmgw_upstream_failures_total",
    "llmgw_stream_interruptions_total",
)
ROUTER_DECISIONS = "vllm_router_prefix_routing_decisions_total"


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--quick", action="store_true", help="one round, warm-up 15 s, measure 30 s; report in the run dir"
    )
    p.add_argument("--only", default="", help="comma-separated targets (default: all four)")
    p.add_argument("--rate", type=float, default=12.0, help="arrivals per second (Poisson)")
    p.add_argument("--warmup-s", type=float, default=45.0)
    p.add_argument("--measure-s", type=float, default=90.0)
    p.add_argument(
        "--rounds",
        type=int,
        default=2,
        help="runs of every target; each round reverses the order, so drifting machine load falls on all",
    )
    p.add_argument("--groups", type=int, default=16)
    p.add_argument("--users-per-group", type=int, default=5)
    p.add_argument("--system-prompt-tokens", type=int, default=1800)
    p.add_argument("--kv-fill", type=float, default=0.72, help="working set / total KV capacity")
    p.add_argument("--max-seqs", type=int, default=8)
    p.add_argument("--prefill-ms-per-token", type=float, default=1.0)
    p.add_argument("--decode-ms", type=float, default=20.0)
    p.add_argument("--decode-ms-per-seq", type=float, default=0.5)
    p.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        help="multiplies the sims' durations and the phases, divides the rate: same run, faster or slower",
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--no-pin", action="store_true", help="do not pin the gateway and the load to cores")
    p.add_argument("--out-dir", type=Path, default=None, help="default bench/results (--quick: the run dir)")
    p.add_argument("--max-minutes", type=float, default=40.0, help="skip targets not started by then")
    p.add_argument("--note", action="append", default=[], help="a line for the report's notes (repeatable)")
    a = p.parse_args(argv)
    if a.quick:
        a.warmup_s, a.measure_s, a.rounds = 15.0, 30.0, 1
    return a


def chosen(args: argparse.Namespace) -> list[Gateway]:
    if not args.only:
        return list(GATEWAYS)
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    known = {g.name: g for g in GATEWAYS}
    if unknown := [n for n in names if n not in known]:
        raise SystemExit(f"quality: unknown target {unknown[0]!r}; choose from {', '.join(known)}")
    return [known[n] for n in names]


def check_tokenizer(replicas: Replicas, schedule: Schedule) -> dict[str, Any]:
    """The sim's own count (POST /tokenize) of group 0's system prompt and first request."""
    first = json.loads(next(r.body for r in schedule.requests if r.group == 0))
    url = replicas.sims[0].url + "/tokenize"
    system = post_json(
        url, {"model": MODEL, "messages": first["messages"][:1], "add_generation_prompt": False}
    )
    whole = post_json(url, {"model": MODEL, "messages": first["messages"]})
    planned = next(r.prompt_tokens for r in schedule.requests if r.group == 0)
    return {
        "system_prompt_tokens": system["count"],
        "first_request_tokens": whole["count"],
        "planned_first_request_tokens": planned,
        "agrees": whole["count"] == planned and system["count"] == schedule.system_prompt_tokens[0],
    }


def run_target(
    gateway: Gateway,
    args: argparse.Namespace,
    schedule: Schedule,
    costs: SimCosts,
    run_dir: Path,
    tokenizer: dict[str, Any],
    round_no: int,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Fresh sims, the gateway in front of them, the schedule through it: the figures,
    and one row per request."""
    values = {"root": str(ROOT), "run_dir": str(run_dir), "bench_venv": str(BENCH_VENV)}
    entry: dict[str, Any] = {
        "name": gateway.name,
        "round": round_no,
        "port": gateway.port,
        "note": gateway.note,
    }
    stem = f"{gateway.name}-round{round_no}"
    with Replicas(costs, base_seed=args.seed * 100, cpu=None if args.no_pin else {LOAD_CORE}) as replicas:
        argv = gateway.argv(values, replicas.urls)
        env = {k: v.format(**values) for k, v in gateway.env}
        entry["command"] = (
            " ".join(f"{k}={v}" for k, v in env.items()) + (" " if env else "") + shlex.join(argv)
        )
        if not tokenizer:
            tokenizer.update(check_tokenizer(replicas, schedule))
        print(f"[{gateway.name} round {round_no}] starting: {entry['command']}", flush=True)
        proc = Proc(
            gateway.name,
            argv,
            core=GATEWAY_CORE,
            log_path=run_dir / f"{stem}.log",
            env=env,
            cwd=ROOT,
        )
        try:
            entry["ready_s"] = round(wait_ready(proc, gateway, 90.0), 2)
            snap: dict[str, Any] = {}

            async def mark() -> None:
                snap["states"] = await asyncio.to_thread(replicas.states)
                snap["cpu"] = proc.cpu_seconds()
                snap["core"] = core_times(GATEWAY_CORE)
                snap["loadavg"] = os.getloadavg()[0]

            outcomes = asyncio.run(
                drive(
                    f"http://127.0.0.1:{gateway.port}",
                    schedule.requests,
                    at_measure_start=mark,
                    measure_start_s=schedule.warmup_s,
                )
            )
            cpu_end, core_end = proc.cpu_seconds(), core_times(GATEWAY_CORE)
            states_after = replicas.states()
            records = replicas.finished_requests()
            page = settled_metrics(gateway, len(schedule.requests) + 1)
            (run_dir / f"{stem}-metrics.txt").write_text(page)
            if gateway.name.startswith("llmgw"):
                entry["gateway_counters"] = metric_values(page, LLMGW_COUNTERS)
            else:
                entry["router_decisions"] = labelled_values(page, ROUTER_DECISIONS, "outcome")
            entry["replicas_exited"] = replicas.exited()
        except StartError as exc:
            entry["skipped"] = str(exc)
            print(f"[{gateway.name}] SKIPPED: {exc}", flush=True)
            return entry, []
        finally:
            proc.stop()
    if "states" not in snap:
        entry["skipped"] = "the run ended before the measured window began"
        return entry, []
    entry["summary"], rows = analyse(
        outcomes,
        replica_of=replicas.replica_of,
        states_before=snap["states"],
        states_after=states_after,
        sim_records=records,
        measure_s=schedule.measure_s,
        max_seqs=costs.max_seqs,
        max_tokens=schedule.shape.max_tokens,
    )
    with (run_dir / f"{stem}-requests.jsonl").open("w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    busy = core_end[0] - snap["core"][0]
    wall = core_end[1] - snap["core"][1]
    cpu = cpu_end - snap["cpu"]
    entry["machine"] = {
        "gateway_cpu_ms_per_request": round(cpu * 1000 / max(1, entry["summary"]["ok"]), 2),
        "gateway_core_busy_pct": round(100 * busy / wall, 1) if wall else None,
        "gateway_core_others_pct": round(100 * max(0.0, busy - cpu) / wall, 1) if wall else None,
        "loadavg_measure_start": round(snap["loadavg"], 2),
        "loadavg_end": round(os.getloadavg()[0], 2),
    }
    s = entry["summary"]
    ttft = s["ttft_ms"]
    print(
        f"[{gateway.name} round {round_no}] TTFT p50/p90/p99 {ttft['p50']}/{ttft['p90']}/{ttft['p99']} ms, "
        f"hit rate {s['prefix_cache']['hit_rate']}, errors {s['errors']}/{s['measured']}, "
        f"groups split {s['routing']['groups_split']}",
        flush=True,
    )
    return entry, rows


def settled_metrics(gateway: Gateway, answered: int, limit_s: float = 10.0) -> str:
    """The gateway's metrics page once llmgw has counted every request it answered (it
    counts a stream after relaying its last byte, which may be after the client has read
    it); polled, for at most `limit_s`. Other gateways' pages are read once."""
    page = metrics_page(gateway)
    deadline = time.monotonic() + limit_s
    while gateway.name.startswith("llmgw") and time.monotonic() < deadline:
        if metric_values(page, ("llmgw_requests_total",)).get("llmgw_requests_total", 0) >= answered:
            break
        time.sleep(0.2)
        page = metrics_page(gateway)
    return page


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    gateways = chosen(args)
    t = args.time_scale
    shape = Shape(
        groups=args.groups,
        users_per_group=args.users_per_group,
        system_prompt_tokens=args.system_prompt_tokens,
        seed=args.seed,
    )
    print("building the request sequence…", flush=True)
    schedule = build(
        shape, rate=args.rate / t, warmup_s=args.warmup_s * t, measure_s=args.measure_s * t, model=MODEL
    )
    costs = SimCosts(
        max_seqs=args.max_seqs,
        kv_blocks=math.ceil(schedule.working_set_blocks / (args.kv_fill * len(SIM_PORTS))),
        block_size=BLOCK_SIZE,
        prefill_ms_per_token=args.prefill_ms_per_token,
        decode_ms=args.decode_ms,
        decode_ms_per_seq=args.decode_ms_per_seq,
        time_scale=t,
    )
    busy = [p for p in (*SIM_PORTS, *(g.port for g in gateways)) if not port_is_free(p)]
    if busy:
        raise SystemExit(f"quality: port {busy[0]} is already in use on 127.0.0.1")
    started = dt.datetime.now().astimezone()
    run_dir = ROOT / ".cache" / "bench-run" / f"routing-{started.strftime('%Y%m%d-%H%M%S')}"
    run_dir.mkdir(parents=True)
    if not args.no_pin and os.cpu_count() and os.cpu_count() >= 2:
        os.sched_setaffinity(0, {LOAD_CORE})  # the harness and the sims it starts stay off the gateway's core
    else:
        args.no_pin = True
    meta: dict[str, Any] = {
        "date": started.strftime("%Y-%m-%d %H:%M %Z"),
        "command": f"cd {ROOT} && " + shlex.join([".venv/bin/python", "bench/routing/quality.py", *argv]),
        "run_dir": str(run_dir),
        "machine": {"cpus": os.cpu_count(), "loadavg_start": round(os.getloadavg()[0], 2)},
        "workload": schedule.summary(),
        "sims": {**costs.__dict__, "replicas": len(SIM_PORTS), "kv_fill": args.kv_fill},
        "pinned": not args.no_pin,
        "rounds": args.rounds,
        "notes": list(args.note),
        "targets": [],
    }
    deadline = time.monotonic() + args.max_minutes * 60
    tokenizer: dict[str, Any] = {}
    rows: dict[str, list[dict[str, Any]]] = {g.name: [] for g in gateways}
    for round_no in range(1, args.rounds + 1):
        for gateway in gateways if round_no % 2 else gateways[::-1]:
            if time.monotonic() > deadline:
                meta["targets"].append(
                    {
                        "name": gateway.name,
                        "round": round_no,
                        "skipped": f"--max-minutes {args.max_minutes} reached",
                    }
                )
                continue
            entry, got = run_target(gateway, args, schedule, costs, run_dir, tokenizer, round_no)
            meta["targets"].append(entry)
            rows[gateway.name] += got
    meta["pooled"] = [pooled(name, rows[name], meta["targets"]) for name in rows]
    meta["tokenizer_check"] = tokenizer
    meta["machine"]["loadavg_end"] = round(os.getloadavg()[0], 2)
    out_dir = args.out_dir or (run_dir if args.quick else ROOT / "bench" / "results")
    path = write(out_dir, f"routing-quality-{started.strftime('%Y-%m-%d')}", meta)
    print(markdown(meta).split("## Targets")[0])
    print(f"wrote {path} and {path.with_suffix('.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
