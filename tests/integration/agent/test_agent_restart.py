"""Serving engines outlive everything around them: an agent restart adopts them, a
network blip and a control-plane restart find them reported as they were, and none of
it restarts an engine."""

from __future__ import annotations

import os
import signal

from agent_helpers import PORT_RANGE, AgentStarter, pid_alive, sim_profile

from llmgw.protocol.messages import NodeSettings, ReplicaState, ReplicaStatus, StartReplica, StopReplica
from llmgw.testing.agent import FakeControlPlane

ENDED = {ReplicaStatus.READY, ReplicaStatus.FAILED, ReplicaStatus.CRASHED}


def _by_id(states: tuple[ReplicaState, ...]) -> dict[str, ReplicaState]:
    return {s.replica_id: s for s in states}


def test_a_restarted_agent_adopts_its_engines_and_reports_the_dead(
    control: FakeControlPlane, start_agent: AgentStarter
) -> None:
    first = start_agent(control.address)
    control.wait_registered("n1")
    for replica_id in ("keep", "die"):
        control.send("n1", StartReplica(replica_id=replica_id, model="m", profile=sim_profile()))
    keep = control.wait_replica("n1", "keep", ENDED)
    die = control.wait_replica("n1", "die", ENDED)
    assert keep.state == die.state == ReplicaStatus.READY

    assert first.stop() == 0
    assert pid_alive(keep.pid), "stopping the agent leaves its engines running"
    os.kill(die.pid, signal.SIGKILL)  # and one of them dies while no agent watches

    start_agent(control.address, state_dir=first.state_dir)
    register = control.wait_registered("n1", count=2)
    states = _by_id(register.replicas)
    adopted = states["keep"]
    assert adopted.state == ReplicaStatus.READY
    assert adopted.pid == keep.pid
    assert adopted.url == keep.url
    dead = states["die"]
    assert dead.state == ReplicaStatus.CRASHED
    assert "while its agent was not running" in dead.detail
    assert dead.log_tail

    # The adopted engine is the agent's to stop like any other.
    control.send("n1", StopReplica(replica_id="keep"))
    control.wait_replica("n1", "keep", {ReplicaStatus.STOPPED})
    assert not pid_alive(keep.pid)


def test_a_blip_and_a_control_plane_restart_leave_engines_alone(
    control: FakeControlPlane, start_agent: AgentStarter
) -> None:
    start_agent(control.address)
    control.wait_registered("n1")
    control.send("n1", StartReplica(replica_id="steady", model="m", profile=sim_profile()))
    ready = control.wait_replica("n1", "steady", ENDED)
    assert ready.state == ReplicaStatus.READY

    control.drop("n1")
    again = control.wait_registered("n1", count=2)
    assert _by_id(again.replicas)["steady"].pid == ready.pid

    port = control.port
    control.stop()
    with FakeControlPlane(port=port, settings=NodeSettings(port_range=PORT_RANGE)) as restarted:
        register = restarted.wait_registered("n1")
        steady = _by_id(register.replicas)["steady"]
        assert steady.state == ReplicaStatus.READY
        assert steady.pid == ready.pid
        assert not [s for s in restarted.agent("n1").history if s.state == ReplicaStatus.STARTING]
        restarted.send("n1", StopReplica(replica_id="steady"))
        restarted.wait_replica("n1", "steady", {ReplicaStatus.STOPPED})
    starts = [s for s in control.agent("n1").history if s.replica_id == "steady" and s.pid]
    assert {s.pid for s in starts} == {ready.pid}, "one engine process all along"
