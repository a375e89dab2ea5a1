"""The node's side of orders and reports, in process: heartbeats carry the inventory
only when it changed, an order it cannot take is refused with a reason, and a replica
stopped while its weights download is stopped before any process starts."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
from agent_helpers import small_inventory

from llmgw.agent.node import Node, NodeConfig
from llmgw.agent.weights import Progress, WeightsPlan
from llmgw.protocol.messages import (
    AgentMessage,
    Error,
    ProfileSpec,
    ReplicaState,
    ReplicaStatus,
    StartReplica,
    StopReplica,
)


class HeldFetcher:
    """A fetcher whose downloads never finish until the test says so."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = False

    async def resolve(self, plan: WeightsPlan, engine: str, progress: Progress | None = None) -> Path:
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        raise AssertionError("unreachable")


def run(tmp_path: Path, test: Callable[[Node], Awaitable[None]], **node_args: object) -> None:
    async def main() -> None:
        inventories = iter([small_inventory(), small_inventory(), small_inventory("renamed")])
        config = NodeConfig(node_id="n1", state_dir=tmp_path / "state", weights_dir=tmp_path / "weights")
        async with aiohttp.ClientSession() as session:
            node = Node(config, session, discover=lambda: next(inventories), **node_args)  # type: ignore[arg-type]
            await node.start()
            try:
                await test(node)
            finally:
                await node.close()

    asyncio.run(main())


def _drain(node: Node) -> list[AgentMessage]:
    out: list[AgentMessage] = []
    while not node.outbox.empty():
        out.append(node.outbox.get_nowait())
    return out


def test_heartbeats_carry_the_inventory_only_when_it_changed(tmp_path: Path) -> None:
    async def test(node: Node) -> None:
        assert node.register_message().inventory.hostname == "n1"
        assert node.heartbeat_message(1).inventory is None
        node.inventory = small_inventory("renamed")
        changed = node.heartbeat_message(2).inventory
        assert changed is not None
        assert changed.hostname == "renamed"
        assert node.heartbeat_message(3).inventory is None

    run(tmp_path, test)


def test_an_order_with_an_unusable_id_is_refused(tmp_path: Path) -> None:
    async def test(node: Node) -> None:
        node.handle(
            StartReplica(replica_id="../escape", model="m", profile=ProfileSpec(name="p", engine="sim"))
        )
        [error] = _drain(node)
        assert isinstance(error, Error)
        assert error.code == "refused"
        assert error.replica_id == "../escape"
        assert node.supervisor.replicas == {}

    run(tmp_path, test)


def test_an_order_with_the_wrong_number_of_ports_fails_the_replica(tmp_path: Path) -> None:
    async def test(node: Node) -> None:
        order = StartReplica(
            replica_id="r1", model="m", profile=ProfileSpec(name="p", engine="sim"), ports=(21000, 21001)
        )
        node.handle(order)
        replica = node.supervisor.replicas["r1"]
        await asyncio.wait_for(replica.ended.wait(), 10)
        assert replica.status == ReplicaStatus.FAILED
        assert "gives 2 ports and this profile takes 1" in replica.detail
        assert replica.process is None

    run(tmp_path, test)


def test_a_replica_stopped_while_its_weights_download_never_starts(tmp_path: Path) -> None:
    fetcher = HeldFetcher()

    async def test(node: Node) -> None:
        profile = ProfileSpec(name="cpu", engine="llamacpp", model_path="hf:org/big/big.gguf")
        node.settings = node.settings.model_copy(update={"mirror_url": "http://127.0.0.1:9"})
        node.handle(StartReplica(replica_id="big", model="big", profile=profile))
        await asyncio.wait_for(fetcher.started.wait(), 10)
        await node.stop_replica(StopReplica(replica_id="big"))
        replica = node.supervisor.replicas["big"]
        assert replica.status == ReplicaStatus.STOPPED
        assert replica.detail == "stopped before its engine was started"
        assert replica.process is None
        assert fetcher.cancelled
        states = [m.state for m in _drain(node) if isinstance(m, ReplicaState)]
        assert states == [ReplicaStatus.STARTING, ReplicaStatus.STOPPED]

    run(tmp_path, test, fetcher=fetcher)
