"""Fenced orders: the agent obeys orders of the highest leader term it has seen, refuses
an order from an earlier term with `error` code `stale_term`, and keeps that term in its
state directory, so a restarted agent still refuses the deposed leader."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp

from llmgw.agent.node import Node, NodeConfig
from llmgw.agent.state import StateDir, TermFence
from llmgw.protocol.inventory import Inventory
from llmgw.protocol.messages import (
    STALE_TERM,
    AgentMessage,
    Error,
    ProfileSpec,
    ReplicaState,
    StartReplica,
    StopReplica,
    decode_from_control,
    encode,
)


def _inventory() -> Inventory:
    return Inventory(
        hostname="node",
        llmgw_version="0.1.0",
        cpu_cores=2,
        memory_total_bytes=1 << 30,
        memory_available_bytes=1 << 30,
        weights_dir="/tmp/weights",
        disk_free_bytes=1 << 30,
        disk_total_bytes=1 << 31,
    )


def _start(replica_id: str, term: int) -> StartReplica:
    return StartReplica(
        replica_id=replica_id, model="chat", profile=ProfileSpec(name="sim", engine="sim"), term=term
    )


def _drain(node: Node) -> list[AgentMessage]:
    out: list[AgentMessage] = []
    while not node.outbox.empty():
        out.append(node.outbox.get_nowait())
    return out


def test_a_lower_term_is_refused_and_the_highest_is_kept_on_disk(tmp_path: Path) -> None:
    path = StateDir(tmp_path).term_path
    fence = TermFence(path)
    assert fence.highest == 0
    assert fence.admit(3)
    assert path.read_text().strip() == "3"
    assert fence.admit(3), "the same term again is the same leader"
    assert not fence.admit(2)
    assert fence.admit(0), "term 0 is a control plane without a lease, never refused"
    assert fence.admit(5)

    restarted = TermFence(path)
    assert restarted.highest == 5
    assert not restarted.admit(4)
    assert restarted.admit(6)


def test_an_unreadable_term_file_starts_from_zero(tmp_path: Path) -> None:
    path = tmp_path / "term"
    path.write_text("not a number\n")
    fence = TermFence(path)
    assert fence.highest == 0
    assert fence.admit(2)
    assert path.read_text().strip() == "2"


def test_orders_carry_their_term_on_the_wire_and_default_to_none() -> None:
    order = decode_from_control(encode(_start("r1", 7)))
    assert isinstance(order, StartReplica)
    assert order.term == 7
    stop = decode_from_control('{"type": "stop_replica", "replica_id": "r1"}')
    assert isinstance(stop, StopReplica)
    assert stop.term == 0


def test_the_node_refuses_an_order_from_a_deposed_leader_even_after_a_restart(tmp_path: Path) -> None:
    async def scenario() -> None:
        config = NodeConfig(node_id="n1", state_dir=tmp_path, weights_dir=tmp_path / "weights")
        async with aiohttp.ClientSession() as session:
            node = Node(config, session, discover=_inventory)
            try:
                # A stop for a replica the node does not know is answered `stopped`: the
                # answer shows the order was obeyed.
                node.handle(StopReplica(replica_id="gone", term=5))
                for _ in range(100):
                    if not node.outbox.empty():
                        break
                    await asyncio.sleep(0.01)
                [obeyed] = _drain(node)
                assert isinstance(obeyed, ReplicaState)
                assert obeyed.replica_id == "gone"

                node.handle(_start("late", term=4))
                [refusal] = _drain(node)
                assert isinstance(refusal, Error)
                assert (refusal.code, refusal.replica_id) == (STALE_TERM, "late")
                assert "term 4" in refusal.message
                assert node.supervisor.get("late") is None, "nothing was started"
            finally:
                await node.close()

            again = Node(config, session, discover=_inventory)
            try:
                again.handle(StopReplica(replica_id="gone", term=4))
                [refusal] = _drain(again)
                assert isinstance(refusal, Error)
                assert refusal.code == STALE_TERM
            finally:
                await again.close()

    asyncio.run(scenario())
