"""A setting changed while agents are connected: the hub (on a real loopback socket)
sends every agent a new `firewall` message when `firewall.enabled` or
`firewall_networks` changes, and only then, and the agent's node (its nft run inside the
test's network namespace) installs, widens and removes llmgw's table accordingly."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from llmgw.agent.client import AgentLink
from llmgw.agent.nft import Nft
from llmgw.agent.node import Node, NodeConfig
from llmgw.agent.node_firewall import NodeFirewall
from llmgw.control.runtime.hub import AgentHub
from llmgw.protocol.inventory import Inventory
from llmgw.protocol.messages import (
    Error,
    FetchProgress,
    Firewall,
    Heartbeat,
    NodeSettings,
    Register,
    ReplicaState,
)
from support.netns import Namespace, network_namespace

WAIT_S = 20.0
GB = 1 << 30


class Heard:
    """The hub's events: the registrations and what the agent refused."""

    def __init__(self) -> None:
        self.registrations: list[str] = []
        self.refusals: list[str] = []

    def registered(self, message: Register) -> None:
        self.registrations.append(message.node_id)

    def heartbeat(self, node_id: str, message: Heartbeat) -> None:
        pass

    def replica_state(self, node_id: str, message: ReplicaState) -> None:
        pass

    def fetch_progress(self, node_id: str, message: FetchProgress) -> None:
        pass

    def refused(self, node_id: str, message: Error) -> None:
        self.refusals.append(message.message)

    def disconnected(self, node_id: str) -> None:
        pass


def _inventory() -> Inventory:
    return Inventory(
        hostname="n1",
        llmgw_version="0.1.0",
        cpu_cores=2,
        memory_total_bytes=8 * GB,
        memory_available_bytes=8 * GB,
        weights_dir="/tmp/weights",
        disk_free_bytes=10 * GB,
        disk_total_bytes=20 * GB,
        engines={"sim": "0.1.0"},
    )


@pytest.fixture
def ns(tmp_path: Path) -> Iterator[Namespace]:
    with network_namespace(tmp_path) as namespace:
        yield namespace


def _allowed(ns: Namespace) -> list[Any] | None:
    done = ns.nft("-j", "list", "set", "inet", "llmgw", "allowed_v4")
    if done.returncode != 0:
        return None
    sets = [item["set"] for item in json.loads(done.stdout)["nftables"] if "set" in item]
    elements: list[Any] = sets[0].get("elem", [])
    return elements


async def _until(what: Any, explain: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while not await asyncio.to_thread(what):
        assert loop.time() < deadline, f"{explain}: not within {WAIT_S:g}s"
        await asyncio.sleep(0.05)


def test_changed_settings_reach_the_table_and_others_do_not_touch_it(ns: Namespace, tmp_path: Path) -> None:
    async def test() -> None:
        heard = Heard()
        settings = NodeSettings(firewall=True, firewall_networks=("10.5.0.0/16",), port_range=(23000, 23099))
        hub = AgentHub(heard, settings=settings, heartbeat_interval=timedelta(seconds=1))
        await hub.start("127.0.0.1", 0, None)
        config = NodeConfig(node_id="n1", state_dir=tmp_path / "state", weights_dir=tmp_path / "weights")
        firewall = NodeFirewall(Nft((str(ns.nft_program),)))
        stop = asyncio.Event()
        async with aiohttp.ClientSession() as session:
            node = Node(config, session, discover=_inventory, firewall=firewall)
            received: list[Firewall] = []
            apply = node.apply_firewall

            async def counted(message: Firewall) -> None:
                received.append(message)
                await apply(message)

            node.apply_firewall = counted  # type: ignore[method-assign]
            await node.start()
            link = AgentLink(node, session, f"127.0.0.1:{hub.port}", ssl_context=None)
            task = asyncio.create_task(link.run(stop))
            try:
                await _until(
                    lambda: _allowed(ns) == [{"prefix": {"addr": "10.5.0.0", "len": 16}}],
                    "the table installed at registration",
                )
                assert len(received) == 1
                # A setting other than the firewall's: no firewall message.
                await hub.broadcast_settings(settings.model_copy(update={"mirror_url": "http://m:9/"}))
                await _until(lambda: node.settings.mirror_url == "http://m:9/", "the new settings")
                assert len(received) == 1
                await hub.broadcast_settings(
                    node.settings.model_copy(update={"firewall_networks": ("10.5.0.0/16", "10.6.0.9")})
                )
                await _until(
                    lambda: _allowed(ns) == [{"prefix": {"addr": "10.5.0.0", "len": 16}}, "10.6.0.9"],
                    "the table widened to 10.6.0.9",
                )
                await hub.broadcast_settings(node.settings.model_copy(update={"firewall": False}))
                await _until(lambda: "inet llmgw" not in ns.tables(), "the table removed")
                assert [m.enabled for m in received] == [True, True, False]
                assert heard.registrations == ["n1"]
                assert heard.refusals == []
            finally:
                stop.set()
                await asyncio.wait_for(task, WAIT_S)
                await node.close()
                await hub.close()

    asyncio.run(test())
