"""A real `llmgw server` with its control plane on, real agents (`python -m
llmgw.cli.agent`) dialling it on loopback, and sim engines they start on its orders.

What a test observes is what a user could: chat answers through the gateway's OpenAI
port, and the engines each agent runs, read from its state directory (the replica
records name the process by PID and start time). Every engine an agent started is
killed by its PID when the test ends, so a failing test leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx

from llmgw.agent.state import StateDir, is_same_process
from llmgw.testing.server import GatewayProcess, free_port, start_gateway

T = TypeVar("T")
PORT_RANGE = (22000, 22999)
"""Engines' ports in these tests, away from the agent tests' range and from port 0."""
FAST_SIM = ["--decode-ms", "1", "--prefill-ms-per-token", "0.01", "--default-max-tokens", "8"]


class WaitTimeout(AssertionError):
    """What a test waited for did not happen in time."""


def wait_for(what: Callable[[], T | None], timeout: float, explain: str, pause: float = 0.1) -> T:
    """Polls `what` until it returns something true; WaitTimeout after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        result = what()
        if result:
            return result
        if time.monotonic() > deadline:
            raise WaitTimeout(f"{explain}: not within {timeout:g}s")
        time.sleep(pause)


def clean_env(**extra: str) -> dict[str, str]:
    keep = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("LLMGW_")
        and k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
    }
    return {**keep, **extra}


def sim_model(name: str, *, cores: int = 0, **fields: Any) -> dict[str, Any]:
    """A sim model placed on CPUs; `min`, `max` and `idle_timeout` go into scaling."""
    scaling = {k: fields.pop(k) for k in ("min", "max", "idle_timeout") if k in fields}
    profile: dict[str, Any] = {"name": "sim", "engine": "sim", "args": FAST_SIM, "startup_timeout": "60s"}
    if cores:
        profile["cpu_cores"] = cores
    return {"name": name, "source": f"sim/{name}", "profiles": [profile], "scaling": scaling, **fields}


def server_config(agent_port: int, *models: dict[str, Any], **control: Any) -> dict[str, Any]:
    """A server with the control plane on, agents on loopback without TLS, short node
    expiry so tests see unreachable and lost in seconds."""
    timing = {
        "interval": "500ms",
        "base_backoff": "1s",
        "unreachable_after": "4s",
        "lost_after": "10s",
        "port_range": list(PORT_RANGE),
        **control,
    }
    return {
        "agent_listen": f"127.0.0.1:{agent_port}",
        "agent_insecure": True,
        "control": {"enabled": True, **timing},
        "router": {"activation_wait": "60s"},
        "models": list(models),
    }


@dataclass
class Agent:
    """A running `python -m llmgw.cli.agent`."""

    node_id: str
    process: subprocess.Popen[bytes]
    state_dir: Path
    log_path: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def engines(self, model: str | None = None) -> dict[str, int]:
        """Replica id to engine PID, for every live engine this agent's state records."""
        out: dict[str, int] = {}
        for record in StateDir(self.state_dir).load_all():
            if (model is None or record.model == model) and is_same_process(record.pid, record.start_ticks):
                out[record.replica_id] = record.pid
        return out

    def kill(self) -> None:
        """SIGKILL by PID, as a machine losing its agent would; its engines stay."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


@dataclass
class Cluster:
    """A server and its agents, for one test."""

    tmp: Path
    agent_port: int
    agents: dict[str, Agent] = field(default_factory=dict)
    servers: list[GatewayProcess] = field(default_factory=list)

    @property
    def server(self) -> GatewayProcess:
        return self.servers[-1]

    def start_server(
        self, *models: dict[str, Any], top: dict[str, Any] | None = None, **control: Any
    ) -> GatewayProcess:
        """A server on this cluster's agent port; every server of the cluster keeps the
        cluster secret (engine keys) in one place, as a restarted one would. `top` adds
        top-level settings (`firewall_networks`)."""
        config = {**server_config(self.agent_port, *models, **control), **(top or {})}
        config["admin_token_file"] = str(self.tmp / "secrets" / "admin-token")
        handle = start_gateway(config, timeout=60)
        self.servers.append(handle)
        return handle

    def start_agent(
        self,
        node_id: str,
        labels: str = "",
        servers: str = "",
        env: dict[str, str] | None = None,
        tls: tuple[str, ...] = (),
        args: tuple[str, ...] = (),
    ) -> Agent:
        """An agent dialling this cluster's agent port, or `servers` (host:port,...);
        `env` is added to its clean environment (a PATH with a recorded nvidia-smi);
        `tls` (--tls-cert F --tls-key F --tls-ca F) in place of --insecure; `args` added
        to its command line."""
        state = self.tmp / f"state-{node_id}"
        log_path = self.tmp / f"agent-{node_id}.log"
        server = servers or f"127.0.0.1:{self.agent_port}"
        command = [sys.executable, "-m", "llmgw.cli.agent", "--server", server]
        command += ["--node-id", node_id, "--state-dir", str(state), *(tls or ("--insecure",))]
        command += ["--log-level", "debug"]
        if labels:
            command += ["--labels", labels]
        command += args
        with log_path.open("ab") as log:
            process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=clean_env(**(env or {})),
            )
        agent = Agent(node_id, process, state, log_path)
        self.agents[node_id] = agent
        return agent

    def engines(self, model: str) -> dict[str, dict[str, int]]:
        """Node to (replica id to PID) for every live engine of `model`."""
        return {n: e for n, a in self.agents.items() if (e := a.engines(model))}

    def chat(self, model: str, timeout: float = 90.0) -> httpx.Response:
        return httpx.post(
            self.server.base_url + "/chat/completions",
            json={"model": model, "messages": [{"role": "user", "content": "hello"}], "max_tokens": 4},
            timeout=timeout,
        )

    def logs(self) -> str:
        parts = [f"--- server ---\n{s.log()[-4000:]}" for s in self.servers]
        parts += [
            f"--- {a.node_id} ---\n{a.log_path.read_text(errors='replace')[-2000:]}"
            for a in self.agents.values()
        ]
        return "\n".join(parts)

    def close(self) -> None:
        for server in self.servers:
            server.stop()
        for agent in self.agents.values():
            agent.stop()
        for agent in self.agents.values():
            for record in StateDir(agent.state_dir).load_all():
                if is_same_process(record.pid, record.start_ticks):
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(record.pgid, signal.SIGKILL)


@contextlib.contextmanager
def cluster(tmp: Path) -> Iterator[Cluster]:
    handle = Cluster(tmp, free_port())
    try:
        yield handle
    finally:
        handle.close()
