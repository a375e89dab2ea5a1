"""Replicas that go wrong, reported and never restarted: a killed engine (crashed, with
its log's tail), one that never becomes healthy (failed at startup_timeout), one that
exits while loading, a missing program, missing weights; and weights fetched through
the mirror, with progress, before the engine starts."""

from __future__ import annotations

import hashlib
import http.server
import os
import signal
import sys
import threading
from collections.abc import Iterator
from datetime import timedelta
from functools import partial
from pathlib import Path

import pytest
from agent_helpers import AgentProcess, AgentStarter, pid_alive, sim_profile

from llmgw.catalog.parts import Origin, OriginFile
from llmgw.protocol.messages import (
    FetchProgress,
    ProfileSpec,
    ReplicaState,
    ReplicaStatus,
    StartReplica,
    StopReplica,
)
from llmgw.testing.agent import FakeControlPlane

ENDED = {ReplicaStatus.READY, ReplicaStatus.FAILED, ReplicaStatus.CRASHED}
STUB = Path(__file__).parent / "engine_stub.py"
WEIGHTS = b"GGUF" + bytes(range(256)) * 2048


@pytest.fixture(scope="module")
def mirror(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A directory served over HTTP on loopback, standing in for the model mirror."""
    root = tmp_path_factory.mktemp("mirror")
    (root / "org" / "tiny").mkdir(parents=True)
    (root / "org" / "tiny" / "tiny-q4.gguf").write_bytes(WEIGHTS)
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture(scope="module")
def agent(
    module_control: FakeControlPlane,
    module_agents: AgentStarter,
    mirror: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> AgentProcess:
    """An agent whose llama-server is the stub engine, and whose mirror is `mirror`."""
    wrapper = tmp_path_factory.mktemp("bin") / "llama-server"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{STUB}" "$@"\n')
    wrapper.chmod(0o755)
    handle = module_agents(
        module_control.address, "n1", "--engine-bin", f"llamacpp={wrapper}", "--mirror", mirror
    )
    module_control.wait_registered("n1")
    return handle


def _history(control: FakeControlPlane, replica_id: str) -> list[ReplicaStatus]:
    return [s.state for s in control.agent("n1").history if s.replica_id == replica_id]


def test_a_killed_engine_is_reported_with_its_log_and_not_restarted(
    module_control: FakeControlPlane, agent: AgentProcess
) -> None:
    module_control.send("n1", StartReplica(replica_id="victim", model="m", profile=sim_profile()))
    ready = module_control.wait_replica("n1", "victim", ENDED)
    assert ready.state == ReplicaStatus.READY, ready
    os.kill(ready.pid, signal.SIGKILL)
    crashed = module_control.wait_replica("n1", "victim", {ReplicaStatus.CRASHED})
    assert crashed.exit_code == -signal.SIGKILL
    assert "signal 9" in crashed.detail
    assert crashed.log_tail, "the log's tail comes with the crash"
    assert any("-m llmgw.cli.sim" in line for line in crashed.log_tail), crashed.log_tail
    # Two heartbeats later it is still crashed, and nothing started in its place.
    beats = len(module_control.agent("n1").heartbeats)
    module_control.wait_for(lambda cp: len(cp.agent("n1").heartbeats) >= beats + 2, 10, "two heartbeats")
    assert module_control.agent("n1").replicas["victim"].state == ReplicaStatus.CRASHED
    assert _history(module_control, "victim").count(ReplicaStatus.STARTING) == 2  # preparing, loading


def test_a_replica_not_healthy_in_time_fails_and_is_stopped(
    module_control: FakeControlPlane, agent: AgentProcess
) -> None:
    never = sim_profile("--startup-delay", "120", startup_timeout=timedelta(seconds=2))
    module_control.send("n1", StartReplica(replica_id="slowpoke", model="m", profile=never))

    def with_pid(cp: FakeControlPlane) -> ReplicaState | None:
        state = cp.agent("n1").replicas.get("slowpoke")
        return state if state is not None and state.pid else None

    starting = module_control.wait_for(with_pid, 30, "a pid")
    failed = module_control.wait_replica("n1", "slowpoke", {ReplicaStatus.FAILED, ReplicaStatus.READY})
    assert failed.state == ReplicaStatus.FAILED
    assert "did not answer 200 within startup_timeout 2s" in failed.detail
    assert not pid_alive(starting.pid)


def test_an_engine_that_exits_while_loading_fails_with_its_words(
    module_control: FakeControlPlane, agent: AgentProcess
) -> None:
    broken = sim_profile("--max-seqs", "0")
    module_control.send("n1", StartReplica(replica_id="broken", model="m", profile=broken))
    failed = module_control.wait_replica("n1", "broken", {ReplicaStatus.FAILED, ReplicaStatus.READY})
    assert failed.state == ReplicaStatus.FAILED
    assert failed.exit_code == 2
    assert "exited while loading (exit status 2)" in failed.detail
    assert any("max-seqs" in line for line in failed.log_tail), failed.log_tail


def test_weights_missing_from_the_node_fail_the_replica(
    module_control: FakeControlPlane, agent: AgentProcess
) -> None:
    profile = ProfileSpec(name="cpu", engine="llamacpp", served_model_name="m", model_path="/nowhere/m.gguf")
    module_control.send("n1", StartReplica(replica_id="noweights", model="m", profile=profile))
    failed = module_control.wait_replica("n1", "noweights", ENDED)
    assert failed.state == ReplicaStatus.FAILED
    assert "models--nowhere" not in failed.detail
    assert "/nowhere/m.gguf" in failed.detail


def test_weights_come_from_the_mirror_with_progress_then_the_engine_starts(
    module_control: FakeControlPlane, agent: AgentProcess
) -> None:
    origin = Origin(
        repo="org/tiny",
        files=(
            OriginFile(path="tiny-q4.gguf", sha256=hashlib.sha256(WEIGHTS).hexdigest(), bytes=len(WEIGHTS)),
        ),
    )
    profile = ProfileSpec(name="cpu", engine="llamacpp", served_model_name="tiny", model_path="hf:org/tiny")
    module_control.send(
        "n1", StartReplica(replica_id="fetched", model="tiny", profile=profile, origin=origin)
    )
    ready = module_control.wait_replica("n1", "fetched", ENDED)
    assert ready.state == ReplicaStatus.READY, ready
    fetched = agent.state_dir / "weights" / "org--tiny" / "tiny-q4.gguf"
    assert fetched.read_bytes() == WEIGHTS
    progress = [m for m in module_control.agent("n1").messages if isinstance(m, FetchProgress)]
    assert progress, "download progress was reported"
    assert progress[-1].done_bytes == progress[-1].total_bytes == len(WEIGHTS)
    log = (agent.state_dir / "replicas" / "fetched" / "engine.log").read_text()
    assert f"model={fetched} bytes={len(WEIGHTS)}" in log, "the engine was given the fetched file"
    module_control.send("n1", StopReplica(replica_id="fetched"))
    module_control.wait_replica("n1", "fetched", {ReplicaStatus.STOPPED})


def test_a_corrupt_mirror_copy_is_refused(module_control: FakeControlPlane, agent: AgentProcess) -> None:
    origin = Origin(repo="org/tiny", files=(OriginFile(path="tiny-q4.gguf", sha256="0" * 64),))
    profile = ProfileSpec(
        name="cpu", engine="llamacpp", served_model_name="t2", model_path="hf:org/tiny/tiny-q4.gguf"
    )
    module_control.send("n1", StartReplica(replica_id="corrupt", model="t2", profile=profile, origin=origin))
    failed = module_control.wait_replica("n1", "corrupt", ENDED)
    assert failed.state == ReplicaStatus.FAILED
    assert "SHA-256" in failed.detail


def test_a_missing_program_fails_the_replica(
    module_control: FakeControlPlane, agent: AgentProcess, tmp_path: Path
) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(WEIGHTS)
    profile = ProfileSpec(
        name="cpu", engine="vllm", served_model_name="m", model_path=str(model), gpus_per_node=0
    )
    module_control.send("n1", StartReplica(replica_id="noprogram", model="m", profile=profile, gpus=("0",)))
    failed = module_control.wait_replica("n1", "noprogram", ENDED)
    assert failed.state == ReplicaStatus.FAILED
    assert "cannot be run on this node" in failed.detail
