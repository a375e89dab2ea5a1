"""Memory over a long streaming run: does the gateway's resident memory stay flat?

The same upstream and load generator as overhead.py (nginx answering a fixed 20-event
stream from memory, wrk at a fixed concurrency from the other core), against llmgw with
the benchmark configuration, for `--minutes` (10 by default) in back-to-back segments.
After each segment the gateway's resident memory (VmRSS) is read from /proc. A gateway
that keeps something per request (a queue, a cache, a reference cycle) grows with the
number of requests served; a flat line is the figure.

    bash bench/router/setup.sh && python3 bench/router/soak.py --minutes 10

Writes bench/results/router-soak-<date>.md and .json. Ports as overhead.py's (the
upstream on 18100, llmgw on 18104), so the two do not run at the same time.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from overhead import run_wrk
from procs import Proc, port_is_free, wait_ready
from targets import BUILTIN, ROOT, UPSTREAM_PORT, render_templates


def rss_kib(pid: int) -> int:
    """Resident memory of `pid` in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def slope_per_hour(points: list[tuple[float, int]]) -> float:
    """Least-squares growth of RSS in KiB per hour over (seconds, KiB) points."""
    n = len(points)
    if n < 2:
        return 0.0
    mean_t = sum(t for t, _ in points) / n
    mean_m = sum(m for _, m in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    cov = sum((t - mean_t) * (m - mean_m) for t, m in points)
    return 0.0 if var == 0 else cov / var * 3600


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--segment", type=int, default=30, help="seconds per wrk segment")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--mode", choices=("stream", "nonstream"), default="stream")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()

    run_dir = ROOT / ".cache" / "bench-run" / f"soak-{time.strftime('%Y%m%d-%H%M%S')}"
    run_dir.mkdir(parents=True)
    render_templates(run_dir)
    target = next(t for t in BUILTIN if t.name == "llmgw")
    for port in (UPSTREAM_PORT, target.port):
        if not port_is_free(port):
            raise SystemExit(f"soak: port {port} is in use on 127.0.0.1 (is overhead.py running?)")
    upstream = Proc(
        "upstream",
        [
            "nginx",
            "-c",
            f"{run_dir}/nginx-upstream.conf",
            "-p",
            str(run_dir),
            "-e",
            f"{run_dir}/upstream.err",
        ],
        core=1,
        log_path=run_dir / "upstream.log",
        env={},
        cwd=run_dir,
    )
    command = [part.format(root=ROOT, run_dir=run_dir) for part in target.command]
    gateway = Proc(
        "llmgw",
        command,
        core=0,
        log_path=run_dir / "llmgw.log",
        env={k: v.format(run_dir=run_dir) for k, v in target.env},
        cwd=run_dir,
    )
    points: list[tuple[float, int]] = []
    segments: list[dict[str, Any]] = []
    try:
        wait_ready(None, UPSTREAM_PORT, 15)
        wait_ready(gateway, target.port, 60)
        started = time.monotonic()
        points.append((0.0, rss_kib(gateway.pid)))
        while time.monotonic() - started < args.minutes * 60:
            result = run_wrk(target.port, args.mode, args.concurrency, args.segment, core=1)
            # wrk reports requests and microseconds; the rate is worked out here.
            result["rps"] = result.get("requests", 0) / max(result.get("duration_us", 0) / 1e6, 1e-9)
            at = time.monotonic() - started
            rss = rss_kib(gateway.pid)
            points.append((at, rss))
            segments.append({"at_s": round(at, 1), "rss_kib": rss, **result})
            print(
                f"[soak] {at:6.0f}s rss {rss / 1024:.1f} MiB, {result.get('rps', 0):,.0f} req/s", flush=True
            )
    finally:
        gateway.stop()
        upstream.stop()

    settled = [p for p in points if p[0] >= 60] or points
    summary = {
        "rss_start_mib": round(points[0][1] / 1024, 1),
        "rss_after_1min_mib": round(settled[0][1] / 1024, 1),
        "rss_end_mib": round(points[-1][1] / 1024, 1),
        "rss_max_mib": round(max(m for _, m in points) / 1024, 1),
        "growth_after_1min_mib_per_hour": round(slope_per_hour(settled) / 1024, 2),
        "requests": sum(int(s.get("requests", 0)) for s in segments),
    }
    command_line = "python3 bench/router/soak.py " + " ".join(sys.argv[1:])
    stamp = dt.date.today().isoformat()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    report = {
        "command": command_line,
        "args": {k: str(v) for k, v in vars(args).items()},
        "summary": summary,
        "segments": segments,
    }
    (args.out_dir / f"router-soak-{stamp}.json").write_text(json.dumps(report, indent=2))
    lines = [
        f"# llmgw memory over a {args.minutes:g}-minute {args.mode} soak ({stamp})",
        "",
        f"Command: `{command_line}` (llmgw: bench/router/llmgw-bench.yaml, wrk c={args.concurrency}).",
        "",
        "| figure | value |",
        "|---|---|",
        *(f"| {k} | {v} |" for k, v in summary.items()),
        "",
        "| at (s) | RSS (MiB) | req/s |",
        "|---:|---:|---:|",
        *(f"| {s['at_s']} | {s['rss_kib'] / 1024:.1f} | {s.get('rps', 0):,.0f} |" for s in segments),
    ]
    (args.out_dir / f"router-soak-{stamp}.md").write_text("\n".join(lines) + "\n")
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
