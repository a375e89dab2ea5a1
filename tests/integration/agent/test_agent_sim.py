"""An agent process and sim replicas: registration, heartbeats, start, ready, answers,
stop, drain, repeated orders, reserved cores and the engine's environment."""

from __future__ import annotations

import os
import threading
import time
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from agent_helpers import PORT_RANGE, AgentProcess, AgentStarter, clean_env, pid_alive, sim_profile

from llmgw.engines.load import NAMES_BY_ENGINE, read_load
from llmgw.protocol.messages import ReplicaStatus, StartReplica, StopReplica
from llmgw.testing.agent import FakeControlPlane
from llmgw.testing.sim import http_status

READY = {ReplicaStatus.READY, ReplicaStatus.FAILED, ReplicaStatus.CRASHED}


@pytest.fixture(scope="module")
def agent(module_control: FakeControlPlane, module_agents: AgentStarter) -> AgentProcess:
    """One agent for every test here, each test with replicas of its own. Its environment
    carries an llmgw secret that no engine may inherit."""
    env = clean_env(LLMGW_ADMIN_TOKEN="secret", KEEP_ME="yes")
    handle = module_agents(module_control.address, "n1", "--labels", "llmgw.io/rack=r7,tier=cpu", env=env)
    module_control.wait_registered("n1")
    return handle


def test_an_agent_registers_its_inventory_and_beats(
    module_control: FakeControlPlane, agent: AgentProcess
) -> None:
    register = module_control.wait_registered("n1")
    assert register.node_id == "n1"
    assert register.inventory.labels == {"llmgw.io/rack": "r7", "tier": "cpu"}
    assert "sim" in register.inventory.engines
    assert register.inventory.cpu_cores >= 1
    assert register.replicas == ()
    beats = module_control.wait_for(
        lambda cp: cp.agent("n1").heartbeats if len(cp.agent("n1").heartbeats) >= 2 else None, 10
    )
    assert [b.seq for b in beats[:2]] == [1, 2]


def test_a_sim_replica_starts_serves_and_stops(module_control: FakeControlPlane, agent: AgentProcess) -> None:
    module_control.send("n1", StartReplica(replica_id="r1", model="m", profile=sim_profile()))
    ready = module_control.wait_replica("n1", "r1", READY)
    assert ready.state == ReplicaStatus.READY, ready
    assert PORT_RANGE[0] <= ready.port <= PORT_RANGE[1]
    assert ready.url == f"http://127.0.0.1:{ready.port}"
    assert http_status(ready.url + "/health") == 200
    answer = httpx.post(
        ready.url + "/v1/chat/completions",
        json={"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4},
        timeout=10,
    )
    assert answer.status_code == 200
    assert os.getpgid(ready.pid) == ready.pid, "the engine leads a process group of its own"
    log = agent.state_dir / "replicas" / "r1" / "engine.log"
    assert "-m llmgw.cli.sim" in log.read_text()
    assert (agent.state_dir / "replicas" / "r1" / "replica.json").exists()

    module_control.send("n1", StopReplica(replica_id="r1"))
    stopped = module_control.wait_replica("n1", "r1", {ReplicaStatus.STOPPED})
    assert stopped.exit_code == 0
    assert not pid_alive(ready.pid)
    assert not (agent.state_dir / "replicas" / "r1" / "replica.json").exists()
    states = [s.state for s in module_control.agent("n1").history if s.replica_id == "r1"]
    assert states[-3:] == [ReplicaStatus.READY, ReplicaStatus.STOPPING, ReplicaStatus.STOPPED]
    assert states[0] == ReplicaStatus.STARTING

    # Stopping an ended replica acknowledges it: it is no longer reported.
    module_control.send("n1", StopReplica(replica_id="r1"))
    module_control.wait_for(
        lambda cp: (
            bool(cp.agent("n1").heartbeats)
            and all(r.replica_id != "r1" for r in cp.agent("n1").heartbeats[-1].replicas)
        ),
        10,
        "r1 gone from heartbeats",
    )


def test_a_repeated_order_is_not_a_second_replica(
    module_control: FakeControlPlane, agent: AgentProcess
) -> None:
    order = StartReplica(replica_id="again", model="m", profile=sim_profile())
    module_control.send("n1", order)
    first = module_control.wait_replica("n1", "again", READY)
    seen = len(module_control.agent("n1").history)
    module_control.send("n1", order)
    again = module_control.wait_for(
        lambda cp: cp.agent("n1").history[-1] if len(cp.agent("n1").history) > seen else None, 10, "an answer"
    )
    assert again.state == ReplicaStatus.READY
    assert again.pid == first.pid


def test_stopping_an_unknown_replica_says_stopped(
    module_control: FakeControlPlane, agent: AgentProcess
) -> None:
    module_control.send("n1", StopReplica(replica_id="nobody"))
    state = module_control.wait_replica("n1", "nobody", {ReplicaStatus.STOPPED}, timeout=10)
    assert state.detail == "not on this node"


def test_a_drained_stop_lets_the_running_request_finish(
    module_control: FakeControlPlane, agent: AgentProcess
) -> None:
    slow = sim_profile("--decode-ms", "100", "--default-max-tokens", "20")
    module_control.send("n1", StartReplica(replica_id="slow", model="m", profile=slow))
    ready = module_control.wait_replica("n1", "slow", READY)
    assert ready.state == ReplicaStatus.READY
    outcome: dict[str, object] = {}

    def ask() -> None:
        response = httpx.post(
            ready.url + "/v1/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "a long answer please"}]},
            timeout=30,
        )
        outcome["status"] = response.status_code
        outcome["tokens"] = response.json()["usage"]["completion_tokens"]
        outcome["at"] = time.monotonic()

    asker = threading.Thread(target=ask)
    asker.start()
    try:
        # Running once the engine's own metrics say so: then the drain has something to wait on.
        deadline = time.monotonic() + 30
        while not read_load(
            httpx.get(ready.url + "/metrics", timeout=5).content, NAMES_BY_ENGINE["sim"]
        ).running:
            assert time.monotonic() < deadline, "the request never started"
        module_control.send("n1", StopReplica(replica_id="slow", drain=timedelta(seconds=20)))
        stopped = module_control.wait_replica("n1", "slow", {ReplicaStatus.STOPPED}, timeout=30)
        stopped_at = time.monotonic()
    finally:
        asker.join(30)
    assert outcome["status"] == 200
    assert outcome["tokens"] == 20, "the answer was complete"
    assert float(str(outcome["at"])) <= stopped_at
    assert stopped.exit_code == 0


def test_a_cpu_profile_gets_its_cores_and_a_clean_environment(
    module_control: FakeControlPlane, agent: AgentProcess
) -> None:
    module_control.send("n1", StartReplica(replica_id="cpu", model="m", profile=sim_profile(cpu_cores=1)))
    ready = module_control.wait_replica("n1", "cpu", READY)
    assert ready.state == ReplicaStatus.READY, ready
    allowed = os.sched_getaffinity(ready.pid)
    assert allowed == {min(os.sched_getaffinity(0))}, "the lowest core, reserved for it alone"
    environ = dict(
        item.split("=", 1)
        for item in Path(f"/proc/{ready.pid}/environ").read_text().split("\0")
        if "=" in item
    )
    assert environ["CUDA_VISIBLE_DEVICES"] == "", "no card was placed on it"
    assert environ["KEEP_ME"] == "yes"
    assert not [k for k in environ if k.startswith("LLMGW_")]
