"""A server with its control plane and three labelled agents on loopback: placement on
distinct nodes, answers through the gateway, a killed agent's replica kept routed while
its node is only unreachable and placed elsewhere once it is lost, and a restarted
control plane adopting what runs."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from control_helpers import Cluster, cluster, sim_model, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture
def three(tmp_path: Path) -> Iterator[Cluster]:
    with cluster(tmp_path) as c:
        for i, rack in enumerate(("r1", "r1", "r2"), start=1):
            c.start_agent(f"n{i}", labels=f"llmgw.io/rack={rack},tier=cpu")
        yield c


def test_min_two_lands_on_two_nodes_and_answers_through_the_gateway(three: Cluster) -> None:
    three.start_server(sim_model("chat", min=2))
    placed = wait_for(
        lambda: (e := three.engines("chat")) and sum(len(r) for r in e.values()) == 2 and e,
        90,
        "two replicas of chat running",
    )
    assert len(placed) == 2, f"two distinct nodes: {placed}"
    answer = three.chat("chat")
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"]
    # Passes go on: nothing more is started.
    assert sum(len(r) for r in three.engines("chat").values()) == 2


def test_a_killed_agent_keeps_its_replica_routed_until_lost_then_it_is_placed_elsewhere(
    three: Cluster,
) -> None:
    three.start_server(sim_model("solo", min=1))
    first = wait_for(lambda: three.engines("solo"), 90, "solo running")
    [(node, _replicas)] = first.items()
    assert three.chat("solo").status_code == 200
    three.agents[node].kill()
    # Unreachable (its socket closed) but not lost: the engine still serves, and the
    # gateway still routes to it.
    answer = three.chat("solo", timeout=5)
    assert answer.status_code == 200, answer.text
    moved = wait_for(
        lambda: {n: r for n, r in three.engines("solo").items() if n != node},
        90,
        f"solo placed again after {node} was lost",
    )
    assert len(moved) == 1
    assert three.chat("solo").status_code == 200


def test_a_restarted_control_plane_adopts_running_replicas_without_restarting_them(
    three: Cluster,
) -> None:
    # The plane waits unreachable_after for known agents before placing anything. Agents
    # back off up to 8 s between dials, and on a loaded machine the restarted server takes
    # several seconds more to open its agent port, so the wait is given room for both.
    three.start_server(sim_model("chat", min=2), unreachable_after="30s", lost_after="60s")
    before = wait_for(
        lambda: (e := three.engines("chat")) and sum(len(r) for r in e.values()) == 2 and e,
        90,
        "two replicas of chat running",
    )
    assert three.chat("chat").status_code == 200
    three.server.stop()
    three.start_server(sim_model("chat", min=2), unreachable_after="30s", lost_after="60s")
    answer = three.chat("chat")
    assert answer.status_code == 200, answer.text
    for agent in three.agents.values():
        wait_for(
            lambda a=agent: a.log_path.read_text().count("registered as") >= 2, 30, "agent re-registered"
        )
    # Through the plane's start-up wait and several passes after it, the engines are
    # the same processes, and no others.
    deadline = time.monotonic() + 14
    while time.monotonic() < deadline:
        assert three.engines("chat") == before, three.logs()
        time.sleep(0.5)
