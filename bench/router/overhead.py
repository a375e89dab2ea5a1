"""Gateway overhead benchmark: what a gateway costs in front of an engine that costs nothing.

An nginx upstream answers chat completions from memory (bench/router/nginx-upstream.conf
.template). Each target (no gateway, nginx as a plain proxy, LiteLLM, the vLLM router
with two policies, llmgw, or any `--target NAME=PORT=COMMAND`) is started pinned to the
gateway core, pointed at that upstream, and loaded by wrk in a closed loop from the
other core: non-streaming and streaming bodies, at concurrency 64 (throughput) and 1
(latency). Each configuration is warmed up, then run N times; the gateway's CPU time
per request is read from /proc around each run. Results go to
bench/results/router-overhead-<date>.md and .json.

    bash bench/router/setup.sh && python3 bench/router/overhead.py

Only 127.0.0.1 is contacted. Every wait is bounded, every process started is stopped
by its PID at the end, and a target that fails to start (llmgw while it is being
written, an anchor that did not install) is recorded with the reason and skipped.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import report
from procs import Proc, StartError, check_chat, core_times, port_is_free, wait_ready
from targets import (
    BENCH_VENV,
    BUILTIN,
    ECHO_MODULE,
    HERE,
    ROOT,
    UPSTREAM,
    UPSTREAM_PORT,
    Target,
    parse_target,
    render_templates,
)

MODES = ("nonstream", "stream")
WRK_LUA = HERE / "chat.lua"


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    names = ",".join(t.name for t in BUILTIN)
    p.add_argument("--only", default=names, help=f"comma-separated targets to run (default: {names})")
    p.add_argument(
        "--target",
        action="append",
        default=[],
        metavar="NAME=PORT=COMMAND",
        help="add a target, or replace the built-in of that name; placeholders as in targets.py",
    )
    p.add_argument("--modes", default=",".join(MODES), help="nonstream, stream or both")
    p.add_argument("--concurrency", default="64,1", help="closed-loop connections, comma-separated")
    p.add_argument("--runs", type=int, default=3, help="measured runs per configuration")
    p.add_argument("--duration", type=int, default=10, help="seconds per measured run")
    p.add_argument("--warmup", type=int, default=3, help="seconds of unmeasured load first")
    p.add_argument("--gateway-core", type=int, default=0)
    p.add_argument("--load-core", type=int, default=1, help="wrk and the upstream run here")
    p.add_argument("--max-minutes", type=float, default=90, help="configurations past this are skipped")
    p.add_argument("--out-dir", type=Path, default=ROOT / "bench" / "results")
    p.add_argument("--note", action="append", default=[], help="a line for the report's notes (repeatable)")
    args = p.parse_args(argv)
    args.modes = [m for m in args.modes.split(",") if m]
    args.concurrency = [int(c) for c in args.concurrency.split(",") if c]
    if bad := [m for m in args.modes if m not in MODES]:
        p.error(f"--modes: {bad} unknown; use {', '.join(MODES)}")
    if not 1 <= args.runs <= 20 or not 1 <= args.duration <= 600 or not 0 <= args.warmup <= 120:
        p.error("--runs 1..20, --duration 1..600 s and --warmup 0..120 s keep a run bounded")
    if any(not 1 <= c <= 4096 for c in args.concurrency):
        p.error("--concurrency: each from 1 to 4096")
    return args


def choose_targets(args: argparse.Namespace) -> list[Target]:
    by_name = {t.name: t for t in BUILTIN}
    wanted = [n for n in args.only.split(",") if n]
    for spec in args.target:
        extra = parse_target(spec)
        if extra.name in by_name:
            # A replaced built-in keeps its environment (llmgw's admin token file in the run directory).
            extra = dataclasses.replace(extra, env=by_name[extra.name].env)
        by_name[extra.name] = extra
        if extra.name not in wanted:
            wanted.append(extra.name)
    if unknown := [n for n in wanted if n not in by_name]:
        raise SystemExit(f"overhead: unknown target(s) {unknown}; known: {', '.join(by_name)}")
    # The baseline is always measured: the added latency of every other target is read against it.
    return [by_name["direct"], *(by_name[n] for n in wanted if n != "direct")]


def preflight(args: argparse.Namespace) -> None:
    problems = [
        f"{tool} is not installed (bash bench/router/setup.sh)"
        for tool in ("wrk", "nginx", "taskset")
        if not shutil.which(tool)
    ]
    if not ECHO_MODULE.exists():
        problems.append(f"{ECHO_MODULE} is missing: apt-get install libnginx-mod-http-echo")
    cores = os.sched_getaffinity(0)
    for core in (args.gateway_core, args.load_core):
        if core not in cores:
            problems.append(f"core {core} is not available to this process (have {sorted(cores)})")
    if args.gateway_core == args.load_core:
        problems.append("--gateway-core and --load-core must differ")
    if problems:
        raise SystemExit("overhead: " + "; ".join(problems))


def run_wrk(port: int, mode: str, concurrency: int, seconds: int, core: int) -> dict[str, Any]:
    argv = [
        "taskset",
        "-c",
        str(core),
        "wrk",
        "-t1",
        f"-c{concurrency}",
        f"-d{seconds}s",
        "--timeout",
        "30s",
        "-s",
        str(WRK_LUA),
        f"http://127.0.0.1:{port}",
    ]
    env = {**os.environ, "BENCH_STREAM": "1" if mode == "stream" else "0"}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=seconds + 90, check=False)
    for line in done.stdout.splitlines():
        if line.startswith("BENCH-JSON "):
            return dict(json.loads(line.removeprefix("BENCH-JSON ")))
    raise RuntimeError(f"wrk gave no result (status {done.returncode}): {(done.stdout + done.stderr)[-500:]}")


def settle(proc: Proc | None, limit_s: float = 15.0) -> None:
    """Waits (at most `limit_s`) until the gateway stops working off requests wrk abandoned
    at the end of the previous run, so they are not charged to the next one."""
    if proc is None:
        return
    deadline = time.monotonic() + limit_s
    before = proc.cpu_seconds()
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = proc.cpu_seconds()
        if now - before < 0.05:
            return
        before = now


def measured_run(
    target: Target,
    proc: Proc | None,
    upstream: Proc,
    *,
    mode: str,
    concurrency: int,
    n: int,
    a: argparse.Namespace,
) -> dict[str, Any]:
    gw0 = proc.cpu_seconds() if proc else None
    up0 = upstream.cpu_seconds()
    gb0, gt0 = core_times(a.gateway_core)
    lb0, lt0 = core_times(a.load_core)
    w = run_wrk(target.port, mode, concurrency, a.duration, a.load_core)
    gw1 = proc.cpu_seconds() if proc else None
    up1 = upstream.cpu_seconds()
    gb1, gt1 = core_times(a.gateway_core)
    lb1, lt1 = core_times(a.load_core)
    requests = int(w["requests"])
    gw_cpu = None if gw0 is None or gw1 is None else gw1 - gw0

    def per_req(cpu_s: float | None) -> float | None:
        return None if cpu_s is None or not requests else cpu_s / requests * 1e6

    errors = w["errors"]
    return {
        "target": target.name,
        "mode": mode,
        "concurrency": concurrency,
        "run": n,
        "requests": requests,
        "duration_s": w["duration_us"] / 1e6,
        "rps": requests / (w["duration_us"] / 1e6),
        "p50_ms": w["latency_us"]["p50"] / 1000,
        "p90_ms": w["latency_us"]["p90"] / 1000,
        "p99_ms": w["latency_us"]["p99"] / 1000,
        "max_ms": w["latency_us"]["max"] / 1000,
        "errors": errors,
        "errors_total": sum(errors.values()),
        "gateway_cpu_s": gw_cpu,
        "gateway_cpu_us_per_req": per_req(gw_cpu),
        "upstream_cpu_us_per_req": per_req(up1 - up0),
        "gateway_core_others_pct": 100 * max(0.0, (gb1 - gb0) - (gw_cpu or 0.0)) / max(gt1 - gt0, 1e-9),
        "load_core_busy_pct": 100 * (lb1 - lb0) / max(lt1 - lt0, 1e-9),
    }


def _us(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


@dataclasses.dataclass
class Live:
    """A target once started: its process (none for `direct`), the modes it answered
    correctly, and why it is out of the measurement, once it is."""

    target: Target
    proc: Proc | None = None
    modes: list[str] = dataclasses.field(default_factory=list)
    skipped: str = ""
    problems: list[str] = dataclasses.field(default_factory=list)


def start_target(target: Target, a: argparse.Namespace, run_dir: Path) -> Live:
    live = Live(target)
    if target.command:
        if not port_is_free(target.port):
            live.skipped = f"port {target.port} is already in use on 127.0.0.1"
            return live
        exe = target.command[0]
        if not (shutil.which(exe) or (Path(exe).is_file() and os.access(exe, os.X_OK))):
            live.skipped = f"{exe} not found (bash bench/router/setup.sh installs the anchors)"
            return live
        live.proc = Proc(
            target.name,
            target.command,
            core=a.gateway_core,
            log_path=run_dir / f"{target.name}.log",
            env=dict(target.env),
            cwd=run_dir,
        )
    try:
        ready_s = wait_ready(live.proc, target.port, target.startup_timeout_s)
    except StartError as exc:
        live.skipped = f"did not start: {exc}"
    except BaseException:
        # Interrupted while waiting: the caller never sees this process, so stop it here.
        if live.proc is not None:
            live.proc.stop()
        raise
    if live.skipped:
        if live.proc is not None:
            live.proc.stop()
        return live
    print(f"[{target.name}] ready after {ready_s:.1f}s", flush=True)
    for mode in a.modes:
        if problem := check_chat(target.port, stream=mode == "stream"):
            live.problems.append(f"{mode}: answer check failed, not measured: {problem}")
            print(f"[{target.name}] {live.problems[-1]}", flush=True)
        else:
            live.modes.append(mode)
    return live


def measure_all(
    lives: Sequence[Live], upstream: Proc, a: argparse.Namespace, deadline: float
) -> list[dict[str, Any]]:
    """Every configuration's runs, interleaved: run n of every target before run n+1 of
    any, so a burst of other work on a shared machine falls on all targets alike."""
    runs: list[dict[str, Any]] = []
    for mode in a.modes:
        for c in a.concurrency:
            for n in range(1, a.runs + 1):
                for live in lives:
                    if live.skipped or mode not in live.modes:
                        continue
                    name, proc = live.target.name, live.proc
                    if time.monotonic() > deadline:
                        live.skipped = "--max-minutes reached before its runs were done"
                        continue
                    if proc is not None and (code := proc.exit_code()) is not None:
                        live.skipped = f"exited with status {code} during the runs.\n{proc.log_tail()}"
                        print(f"[{name}] SKIPPED: {live.skipped}", flush=True)
                        continue
                    try:
                        if n == 1 and a.warmup:
                            run_wrk(live.target.port, mode, c, a.warmup, a.load_core)
                        settle(proc)
                        r = measured_run(live.target, proc, upstream, mode=mode, concurrency=c, n=n, a=a)
                    except (RuntimeError, subprocess.TimeoutExpired) as exc:
                        live.problems.append(f"{mode} c={c} run {n}: {exc}")
                        continue
                    runs.append(r)
                    print(
                        f"[{name}] {mode} c={c} run {n}: {r['rps']:,.0f} req/s, "
                        f"p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms, "
                        f"cpu {_us(r['gateway_cpu_us_per_req'])} µs/req, errors {r['errors_total']}",
                        flush=True,
                    )
    return runs


def versions() -> dict[str, str]:
    def first_line(argv: list[str]) -> str:
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"unknown ({exc})"
        return (
            (done.stdout + done.stderr).strip().splitlines()[0] if (done.stdout + done.stderr).strip() else ""
        )

    out = {
        "nginx": first_line(["nginx", "-v"]).removeprefix("nginx version: nginx/"),
        "wrk": " ".join(first_line(["wrk", "-v"]).split()[1:2]),
    }
    py = BENCH_VENV / "bin" / "python"
    for pkg in ("litellm", "vllm-router"):
        out[pkg] = (
            first_line([str(py), "-c", f"import importlib.metadata as m; print(m.version({pkg!r}))"])
            if py.exists()
            else "not installed"
        )
    llmgw = ROOT / ".venv" / "bin" / "llmgw"
    out["llmgw"] = (
        first_line([str(llmgw), "--version"]).removeprefix("llmgw ") if llmgw.exists() else "absent"
    )
    return out


def machine() -> dict[str, Any]:
    cpu = "unknown CPU"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    return {
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "kernel": platform.release(),
        "loadavg_start": os.getloadavg(),
    }


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    preflight(args)
    targets = choose_targets(args)
    started = dt.datetime.now().astimezone()
    run_dir = ROOT / ".cache" / "bench-run" / started.strftime("%Y%m%d-%H%M%S")
    run_dir.mkdir(parents=True)
    render_templates(run_dir)
    # The harness (and so what it starts without taskset) stays off the gateway's core.
    os.sched_setaffinity(0, {args.load_core})
    values = {"root": str(ROOT), "run_dir": str(run_dir), "upstream": UPSTREAM, "bench_venv": str(BENCH_VENV)}
    meta: dict[str, Any] = {
        "date": started.strftime("%Y-%m-%d %H:%M %Z"),
        "command": f"cd {ROOT} && " + shlex.join(["python3", "bench/router/overhead.py", *argv]),
        "run_dir": str(run_dir),
        "machine": machine(),
        "versions": versions(),
        "settings": {
            "runs": args.runs,
            "duration_s": args.duration,
            "warmup_s": args.warmup,
            "gateway_core": args.gateway_core,
            "load_core": args.load_core,
            "modes": args.modes,
            "concurrency": args.concurrency,
            "wrk": "wrk -t1 -c<concurrency> -d<duration>s --timeout 30s -s bench/router/chat.lua",
            "upstream": UPSTREAM,
        },
        "targets": [],
        "notes": [
            f"Load average {{:.1f}} at the start, {{:.1f}} at the end, on {os.cpu_count()} cores.",
            *args.note,
        ],
        "problems": [],
    }
    if not port_is_free(UPSTREAM_PORT):
        raise SystemExit(f"overhead: port {UPSTREAM_PORT} (the upstream's) is already in use on 127.0.0.1")
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
        core=args.load_core,
        log_path=run_dir / "upstream.log",
        env={},
        cwd=run_dir,
    )
    lives: list[Live] = []
    runs: list[dict[str, Any]] = []
    try:
        wait_ready(upstream, UPSTREAM_PORT, 30)
        if problem := check_chat(UPSTREAM_PORT, stream=True):
            raise SystemExit(f"overhead: the upstream's stream answer is wrong: {problem}")
        for target in targets:
            t = target.rendered(values)
            print(
                f"[{t.name}] starting: {shlex.join(t.command) if t.command else '(upstream itself)'}",
                flush=True,
            )
            lives.append(start_target(t, args, run_dir))
            if lives[-1].skipped:
                print(f"[{t.name}] SKIPPED: {lives[-1].skipped}", flush=True)
        runs = measure_all(lives, upstream, args, time.monotonic() + args.max_minutes * 60)
    finally:
        for live in lives:
            if live.proc is not None:
                live.proc.stop()
        upstream.stop()
    for live in lives:
        t = live.target
        meta["problems"] += [f"{t.name} {p}" for p in live.problems]
        if live.skipped and not t.optional:
            meta["problems"].append(f"{t.name}: {live.skipped.splitlines()[0]} (log: {run_dir}/{t.name}.log)")
        meta["targets"].append(
            {
                "name": t.name,
                "port": t.port,
                "note": t.note,
                "command": " ".join(f"{k}={v}" for k, v in t.env)
                + (" " if t.env else "")
                + shlex.join(t.command),
                "skipped": live.skipped,
            }
        )
    meta["machine"]["loadavg_end"] = os.getloadavg()
    meta["notes"][0] = meta["notes"][0].format(meta["machine"]["loadavg_start"][0], os.getloadavg()[0])
    path = report.write(args.out_dir, f"router-overhead-{started.strftime('%Y-%m-%d')}", meta, runs)
    print(f"wrote {path} and {path.with_suffix('.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
