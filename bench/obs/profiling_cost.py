"""What the profiler costs the gateway: chat requests through `llmgw server` (a fast sim
behind it) in a closed loop, measured in windows: at a gateway with debug_pprof off (the
baseline), and at one with it on with nothing being taken, while a CPU profile is taken
(/debug/pprof/profile) and while a heap sample is taken (/debug/pprof/heap). The four
kinds of window are interleaved, round after round, so a burst of other work on a shared
machine falls on all of them alike.

Per window: requests answered per second, and the gateway process's CPU time per request
(user + system, from /proc), which depends less on what else the machine runs.

Usage: .venv/bin/python bench/obs/profiling_cost.py [--rounds 3] [--window 8] [--threads 4]
Writes bench/results/obs-profiling-cost-<date>.md (the command and the figures).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import threading
import time
from pathlib import Path

import httpx

from llmgw.testing.server import GatewayProcess, start_gateway
from llmgw.testing.sim import start_sim_engine

FAST = ("--decode-ms", "1", "--prefill-ms-per-token", "0.01", "--default-max-tokens", "8")
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hello there"}], "max_tokens": 8}
KINDS = ("debug_pprof off", "on, nothing taken", "cpu profile", "heap sample")
Figures = dict[str, list[tuple[float, float]]]
"""Per kind of window: (requests per second, gateway CPU ms per request) of each round."""
ROUTES = {"cpu profile": "/debug/pprof/profile", "heap sample": "/debug/pprof/heap"}
# Requests answered by one load thread at most, whatever the windows ask.
_MAX_REQUESTS_PER_THREAD = 2_000_000
_SETTLE_S = 0.5


def cpu_seconds(pid: int) -> float:
    """User + system time of a process (fields 14 and 15 of /proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Load:
    def __init__(self, gateway: GatewayProcess, threads: int) -> None:
        self.url = gateway.base_url + "/chat/completions"
        """Where the threads send their next requests; a window points it at its gateway."""
        self.answered = 0
        self.failed = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]

    def _run(self) -> None:
        with httpx.Client(timeout=30) as client:
            for _ in range(_MAX_REQUESTS_PER_THREAD):
                if self._stop.is_set():
                    return
                ok = client.post(self.url, json=CHAT).status_code == 200
                with self._lock:
                    if ok:
                        self.answered += 1
                    else:
                        self.failed += 1

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(60)


def window(gateway: GatewayProcess, load: Load, kind: str, seconds: float, token: str) -> tuple[float, float]:
    """(requests per second, gateway CPU ms per request) over one window."""
    load.url = gateway.base_url + "/chat/completions"
    taker = None
    if kind in ROUTES:
        fmt = "json" if kind == "heap sample" else "speedscope"
        params = {"seconds": seconds + 2 * _SETTLE_S, "format": fmt}

        def take() -> None:
            answer = httpx.get(
                gateway.admin_url + ROUTES[kind],
                params=params,
                headers={"authorization": f"Bearer {token}"},
                timeout=seconds + 120,
            )
            answer.raise_for_status()

        taker = threading.Thread(target=take, daemon=True)
        taker.start()
    time.sleep(_SETTLE_S)  # the recording is under way
    pid = gateway.process.pid
    requests0, cpu0, t0 = load.answered, cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    requests1, cpu1, t1 = load.answered, cpu_seconds(pid), time.monotonic()
    if taker is not None:
        taker.join(seconds + 120)
    time.sleep(_SETTLE_S)  # rendering done before the next window
    done = max(requests1 - requests0, 1)
    return done / (t1 - t0), (cpu1 - cpu0) * 1000 / done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--window", type=float, default=8.0, help="seconds of each window")
    parser.add_argument("--threads", type=int, default=4, help="closed-loop load threads")
    parser.add_argument("--out-dir", type=Path, default=Path(__file__).resolve().parents[1] / "results")
    args = parser.parse_args()
    engine = start_sim_engine(*FAST, "--model", "m")
    endpoints = [{"id": "e", "url": engine.url, "models": ["m"], "engine": "sim"}]
    off = start_gateway({"endpoints": endpoints}, timeout=60)
    gateway = start_gateway({"debug_pprof": True, "endpoints": endpoints}, timeout=60)
    load = Load(gateway, args.threads)
    figures: Figures = {k: [] for k in KINDS}
    try:
        token = gateway.admin_token()
        load.start()
        for target in (off, gateway):  # warm-up
            load.url = target.base_url + "/chat/completions"
            time.sleep(3)
        for _ in range(args.rounds):
            for kind in KINDS:
                target = off if kind == "debug_pprof off" else gateway
                figures[kind].append(window(target, load, kind, args.window, token))
                print(kind, figures[kind][-1], file=sys.stderr)
    finally:
        load.stop()
        gateway.stop()
        off.stop()
        engine.stop()
    write_report(args, figures, load.failed)


def write_report(args: argparse.Namespace, figures: Figures, failed: int) -> None:
    base_rps = statistics.median(r for r, _ in figures[KINDS[0]])
    base_cpu = statistics.median(c for _, c in figures[KINDS[0]])
    rows = []
    for kind in KINDS:
        rps = statistics.median(r for r, _ in figures[kind])
        cpu = statistics.median(c for _, c in figures[kind])
        spread = ", ".join(f"{r:.0f}" for r, _ in figures[kind])
        rows.append(
            f"| {kind} | {rps:.0f} ({spread}) | {(rps / base_rps - 1) * 100:+.0f} % "
            f"| {cpu:.2f} | {(cpu / base_cpu - 1) * 100:+.0f} % |"
        )
    load_average = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    today = datetime.date.today().isoformat()
    command = "python bench/obs/profiling_cost.py " + " ".join(sys.argv[1:])
    text = f"""# The profiler's cost while it runs ({today})

```
{command}
```

Non-streaming chats (8 tokens) through `llmgw server`, a fast sim behind it,
{args.threads} closed-loop client threads in this process; {args.rounds} rounds of four
{args.window:g}-second windows each, interleaved: a gateway with `debug_pprof` off (the
baseline), and one with it on while nothing is taken, while a CPU profile is taken, while a
heap sample is taken. Median over the rounds (each round's req/s in brackets).
Python {platform.python_version()}, {os.cpu_count()} CPUs shared with other work,
load average at the end {load_average}. Requests that failed: {failed}.

| window | req/s (per round) | vs off | gateway CPU ms / request | vs off |
|---|---|---|---|---|
{chr(10).join(rows)}

Outside a recording nothing is installed: "on, nothing taken" should match "off" within
the machine's noise.
"""
    args.out_dir.mkdir(parents=True, exist_ok=True)
    out = args.out_dir / f"obs-profiling-cost-{today}.md"
    suffix = 2
    while out.exists():
        out = args.out_dir / f"obs-profiling-cost-{today}-{suffix}.md"
        suffix += 1
    out.write_text(text)
    print(out)


if __name__ == "__main__":
    main()
