"""First token from an on-demand model that is stopped: what the control plane adds to
the engine's own load time.

A real `llmgw server` with the control plane on and one real agent (`python -m
llmgw.cli.agent`) on loopback; the catalog has one on-demand sim model (min 0, max 1) whose
engine takes `--startup-delay` seconds to load and stops after a short idle timeout.
After one unmeasured cycle (a control plane that just started first gives agents
`unreachable_after` to reconnect), each run waits until the model is stopped (no engine
in the agent's state directory), then sends one streamed chat request to the gateway and
times the first byte of the answer. The request waits in admission, the control plane
places the model, the agent starts the engine, the engine loads, the agent reports it
ready, the control plane publishes it, the request goes.

Beside it, the same engine started by hand (`python -m llmgw.cli.sim --startup-delay D`)
and asked the same request the moment its health answers: the engine's own cold
start, process start-up included. The control plane's cost is the difference.

    .venv/bin/python bench/control/on_demand.py [--runs 5] [--load-s 2]

Writes bench/results/control-on-demand.md and .json. Loopback only; wall clock.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from llmgw.agent.state import StateDir, is_same_process
from llmgw.testing.server import GatewayProcess, free_port, start_gateway
from llmgw.testing.sim import start_sim_engine, wait_until_ready

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"
MODEL = "lazy"
FAST = ["--decode-ms", "1", "--prefill-ms-per-token", "0.01", "--default-max-tokens", "8"]
BODY = {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 4, "stream": True}


def first_byte_s(url: str, model: str, timeout: float = 120.0) -> float:
    """Seconds from sending a streamed chat request to the first byte of its body."""
    started = time.perf_counter()
    with httpx.stream(
        "POST", url + "/v1/chat/completions", json={**BODY, "model": model}, timeout=timeout
    ) as r:
        if r.status_code != 200:
            raise RuntimeError(f"{r.status_code}: {r.read().decode(errors='replace')}")
        for chunk in r.iter_bytes():
            if chunk:
                return time.perf_counter() - started
    raise RuntimeError("the answer had no body")


def live_engines(state_dir: Path) -> list[int]:
    return [r.pid for r in StateDir(state_dir).load_all() if is_same_process(r.pid, r.start_ticks)]


def wait(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout:g}s")
        time.sleep(0.05)


@contextlib.contextmanager
def cluster(load_s: float, idle_s: float, work: Path) -> Iterator[tuple[GatewayProcess, Path]]:
    agent_port = free_port()
    model = {
        "name": MODEL,
        "source": f"sim/{MODEL}",
        "profiles": [
            {
                "name": "sim",
                "engine": "sim",
                "args": [*FAST, "--startup-delay", f"{load_s:g}"],
                "startup_timeout": "2m",
            }
        ],
        "scaling": {"min": 0, "max": 1, "idle_timeout": f"{idle_s:g}s"},
    }
    config = {
        "agent_listen": f"127.0.0.1:{agent_port}",
        "agent_insecure": True,
        "control": {"enabled": True, "interval": "1s", "unreachable_after": "2s", "lost_after": "30s"},
        "router": {"activation_wait": "2m"},
        "models": [model],
    }
    state = work / "agent-state"
    command = [sys.executable, "-m", "llmgw.cli.agent", "--server", f"127.0.0.1:{agent_port}", "--insecure"]
    command += ["--node-id", "bench", "--state-dir", str(state), "--log-level", "warning"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLMGW_")}
    agent = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL)
    server = start_gateway(config, timeout=60)
    try:
        yield server, state
    finally:
        server.stop()
        agent.send_signal(signal.SIGTERM)
        agent.wait(15)
        for record in StateDir(state).load_all():
            if is_same_process(record.pid, record.start_ticks):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(record.pgid, signal.SIGKILL)


def direct_cold_start_s(load_s: float) -> float:
    """The engine alone: process start, its load delay, health 200, then the request."""
    started = time.perf_counter()
    engine = start_sim_engine("--model", MODEL, *FAST, "--startup-delay", f"{load_s:g}", wait_ready=False)
    try:
        wait_until_ready(engine.url, 60)
        return (time.perf_counter() - started) + first_byte_s(engine.url, MODEL)
    finally:
        engine.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--load-s", type=float, default=2.0, help="the sim's --startup-delay")
    parser.add_argument("--idle-s", type=float, default=2.0, help="the model's idle_timeout")
    args = parser.parse_args()
    direct = [direct_cold_start_s(args.load_s) for _ in range(args.runs)]
    via: list[float] = []
    warm: list[float] = []
    with (
        tempfile.TemporaryDirectory(prefix="llmgw-bench-ondemand-") as tmp,
        cluster(args.load_s, args.idle_s, Path(tmp)) as (server, state),
    ):
        for _ in range(args.runs):
            wait(lambda: not live_engines(state), 120, "the model stopped")
            via.append(first_byte_s(server.url, MODEL))
            warm.append(first_byte_s(server.url, MODEL))
    report(args, direct, via, warm)


def _row(name: str, values: list[float]) -> str:
    cells = " | ".join(f"{v:.2f}" for v in values)
    return f"| {name} | {statistics.median(values):.2f} | {min(values):.2f} | {max(values):.2f} | {cells} |"


def report(args: argparse.Namespace, direct: list[float], via: list[float], warm: list[float]) -> None:
    added = [v - statistics.median(direct) for v in via]
    over_load = [v - args.load_s for v in via]
    command = "python bench/control/on_demand.py " + shlex.join(sys.argv[1:])
    runs = " | ".join(f"run {i + 1}" for i in range(args.runs))
    lines = [
        "# First token from a stopped on-demand model",
        "",
        f"`{command.strip()}` on {platform.node()} ({os.cpu_count()} cores,"
        f" Python {platform.python_version()}), {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC.",
        "",
        f"An on-demand sim model (min 0, max 1, idle_timeout {args.idle_s:g}s) whose engine loads for"
        f" {args.load_s:g} s (`--startup-delay`); one real agent and the server on loopback. Seconds:",
        "",
        f"| | median | min | max | {runs} |",
        "| --- | --- | --- | --- | " + " | ".join("---" for _ in range(args.runs)) + " |",
        _row("first byte via the gateway, model stopped", via),
        _row("the same, over the load delay", over_load),
        _row("engine alone: process start + load + first byte", direct),
        _row("control plane's share (via gateway − engine alone's median)", added),
        _row("next request, model running", warm),
        "",
        'The target is the load time + under 1 s. "Over the load delay" includes starting',
        "the engine's Python process (its imports), which the engine alone pays as well;",
        "the control plane's share is what placing, ordering, the agent's start and the",
        "publication add on top of the engine's own cold start.",
        "",
    ]
    text = "\n".join(lines)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "control-on-demand.md").write_text(text)
    data = {
        "command": command.strip(),
        "load_s": args.load_s,
        "idle_s": args.idle_s,
        "via_gateway_s": via,
        "engine_alone_s": direct,
        "control_plane_share_s": added,
        "warm_s": warm,
    }
    (RESULTS / "control-on-demand.json").write_text(json.dumps(data, indent=2) + "\n")
    print(text)


if __name__ == "__main__":
    main()
