"""Helpers for the agent's integration tests: agent processes, sim profiles, and the
clean-up that finds every engine an agent left and kills it by PID."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from llmgw.agent.state import StateDir, is_same_process
from llmgw.protocol.inventory import Inventory
from llmgw.protocol.messages import ProfileSpec

PORT_RANGE = (21000, 21999)
"""Engines' ports in these tests, away from the sims other suites start on port 0."""
FAST_SIM = ("--decode-ms", "1", "--prefill-ms-per-token", "0.01", "--default-max-tokens", "8")


def clean_env(**extra: str) -> dict[str, str]:
    """The test's environment without llmgw settings or proxies, plus `extra`."""
    keep = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("LLMGW_")
        and k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
    }
    return {**keep, **extra}


def sim_profile(
    *args: str, startup_timeout: timedelta = timedelta(seconds=30), **fields: object
) -> ProfileSpec:
    """A sim profile serving model `m`."""
    values: dict[str, object] = {
        "name": "sim",
        "engine": "sim",
        "served_model_name": "m",
        "args": (*FAST_SIM, *args),
        "startup_timeout": startup_timeout,
    }
    values.update(fields)
    return ProfileSpec.model_validate(values)


def kill_engines(state_dir: Path) -> None:
    """Kills every engine the state directory still records, by PID and process group."""
    for record in StateDir(state_dir).load_all():
        if is_same_process(record.pid, record.start_ticks):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(record.pgid, signal.SIGKILL)


def pid_alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie does not count)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


@dataclass
class AgentProcess:
    """A running `llmgw agent`."""

    process: subprocess.Popen[bytes]
    node_id: str
    state_dir: Path
    log_path: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM by PID, then SIGKILL if it outlives `timeout`. Its engines stay."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout)
        return self.process.returncode


AgentStarter = Callable[..., AgentProcess]


def launch_agent(
    started: list[AgentProcess],
    tmp: Path,
    server: str,
    node_id: str = "n1",
    *args: str,
    state_dir: Path | None = None,
    insecure: bool = True,
    env: dict[str, str] | None = None,
    full_cli: bool = False,
) -> AgentProcess:
    """Starts an agent against `server`, its output in a file under `tmp`: `python -m
    llmgw.cli.agent`, the same command as `llmgw agent` (`full_cli`) without importing all of
    llmgw's other commands, which on a busy machine takes seconds."""
    state = state_dir or tmp / f"state-{node_id}"
    log_path = tmp / f"agent-{node_id}-{len(started)}.log"
    entry = ["-m", "llmgw", "agent"] if full_cli else ["-m", "llmgw.cli.agent"]
    command = [sys.executable, *entry, "--server", server, "--node-id", node_id]
    command += ["--state-dir", str(state), "--log-level", "debug"]
    if insecure:
        command.append("--insecure")
    command += args
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env or clean_env()
        )
    handle = AgentProcess(process, node_id, state, log_path)
    started.append(handle)
    return handle


def small_inventory(hostname: str = "n1") -> Inventory:
    """An inventory for a client that speaks the protocol by hand."""
    return Inventory(
        hostname=hostname,
        llmgw_version="0.1.0",
        cpu_cores=2,
        memory_total_bytes=1 << 33,
        memory_available_bytes=1 << 32,
        weights_dir="/tmp/weights",
        disk_free_bytes=1 << 30,
        disk_total_bytes=1 << 31,
    )
