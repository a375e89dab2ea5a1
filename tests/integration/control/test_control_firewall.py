"""A real server's control plane and a real agent (`--firewall`, its nft run inside the
test's own network namespace): the agent installs llmgw's table when it registers, with
the cluster's port range and `firewall_networks`, and a control plane with the firewall
turned off has it removed when the agent registers there."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from control_helpers import PORT_RANGE, Cluster, cluster, wait_for

from support.netns import Namespace, network_namespace

pytestmark = pytest.mark.slow


@pytest.fixture
def ns(tmp_path: Path) -> Iterator[Namespace]:
    (tmp_path / "ns").mkdir()
    with network_namespace(tmp_path / "ns") as namespace:
        yield namespace


@pytest.fixture
def one(tmp_path: Path) -> Iterator[Cluster]:
    with cluster(tmp_path) as c:
        yield c


def _set(ns: Namespace, name: str) -> list[Any] | None:
    """A set of llmgw's table in the namespace; None while there is no table."""
    done = ns.nft("-j", "list", "table", "inet", "llmgw")
    if done.returncode != 0:
        return None
    for item in json.loads(done.stdout)["nftables"]:
        if "set" in item and item["set"]["name"] == name:
            elements: list[Any] = item["set"].get("elem", [])
            return elements
    return None


def test_the_agent_installs_the_table_at_registration_and_removes_it_when_off(
    one: Cluster, ns: Namespace
) -> None:
    first = one.start_server(top={"firewall_networks": ["10.77.0.0/16"]})
    one.start_agent("n1", args=("--firewall", "--nft", str(ns.nft_program)))
    allowed = wait_for(lambda: _set(ns, "allowed_v4"), 60, "llmgw's table in the namespace\n" + one.logs())
    assert {"prefix": {"addr": "10.77.0.0", "len": 16}} in allowed
    assert _set(ns, "guarded_ports") == [{"range": list(PORT_RANGE)}]
    assert ns.tables() == ["inet llmgw"]
    first.stop()
    one.start_server(top={"firewall": {"enabled": False}})
    wait_for(
        lambda: "inet llmgw" not in ns.tables() or None,
        90,
        "llmgw's table removed after the agent registered with a firewall-off server\n" + one.logs(),
    )
    assert ns.tables() == []
