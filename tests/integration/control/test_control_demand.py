"""On-demand models and capacity classes, end to end: a request starts a stopped model
and is answered; the model stops once unasked for its idle timeout; a critical model
asked for on a full node takes the node from an opportunistic one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from control_helpers import Cluster, cluster, sim_model, wait_for

from llmgw.agent.discovery import cpu_cores

pytestmark = pytest.mark.slow


@pytest.fixture
def one(tmp_path: Path) -> Iterator[Cluster]:
    with cluster(tmp_path) as c:
        c.start_agent("n1", labels="tier=cpu")
        yield c


def test_a_request_starts_an_on_demand_model_which_stops_after_its_idle_timeout(one: Cluster) -> None:
    one.start_server(sim_model("lazy", min=0, max=1, idle_timeout="3s"), unreachable_after="2s")
    assert one.engines("lazy") == {}, "nothing runs before it is asked for"
    answer = one.chat("lazy")
    assert answer.status_code == 200, answer.text
    [(node, replicas)] = one.engines("lazy").items()
    assert node == "n1"
    assert len(replicas) == 1
    # Unasked for: stopped, and its engine ends.
    wait_for(lambda: one.engines("lazy") == {}, 60, "lazy stopped after its idle timeout")
    # Asked again: started again.
    assert one.chat("lazy").status_code == 200


def test_a_critical_model_takes_a_full_node_from_an_opportunistic_one(one: Cluster) -> None:
    cores = cpu_cores()
    one.start_server(
        sim_model("batch", min=1, cores=cores, **{"class": "opportunistic"}),
        sim_model("vital", min=0, max=1, cores=cores, idle_timeout="10m", **{"class": "critical"}),
        unreachable_after="2s",
    )
    batch = wait_for(lambda: one.engines("batch"), 60, "batch running")
    assert one.chat("batch").status_code == 200
    answer = one.chat("vital")
    assert answer.status_code == 200, answer.text
    assert one.engines("vital")
    assert one.engines("batch") == {}, f"batch {batch} was preempted"
