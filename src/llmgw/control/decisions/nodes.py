"""The nodes the control plane knows: each registered agent's inventory, when it was last
heard from, and whether its connection is open.

A node's health is a reading of silence, never a stored flag: `node_status` turns the
time since the last frame into ready, unreachable or lost. An open connection that
keeps heartbeating is ready; a closed one is unreachable at once (orders cannot reach
it) but keeps its replicas routed, because an engine outlives its agent and a network
blip must not throw away loaded models; only after `lost_after` of silence is the node
written off and its replicas placed again elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from llmgw.control.decisions.cluster import NodeStatus, NodeView
from llmgw.protocol.inventory import Inventory


def node_status(
    silent_s: float, *, connected: bool, unreachable_after_s: float, lost_after_s: float
) -> NodeStatus:
    """What `silent_s` seconds without a frame make of a node."""
    if silent_s >= lost_after_s:
        return "lost"
    if not connected or silent_s >= unreachable_after_s:
        return "unreachable"
    return "ready"


@dataclass
class NodeRecord:
    """One node as last reported. `last_seen` and `registered_at` are unix times."""

    id: str
    inventory: Inventory
    last_seen: float
    registered_at: float
    connected: bool = True


class NodeRegistry:
    """Every node that ever registered with this control plane, lost ones included (an
    operator asking `llmgw ctl nodes` wants to see the machine that went silent)."""

    def __init__(
        self,
        *,
        unreachable_after_s: float,
        lost_after_s: float,
        clock: Callable[[], float],
    ) -> None:
        self.unreachable_after_s = unreachable_after_s
        self.lost_after_s = lost_after_s
        self._clock = clock
        self._nodes: dict[str, NodeRecord] = {}

    def registered(self, node_id: str, inventory: Inventory) -> NodeRecord:
        now = self._clock()
        record = NodeRecord(node_id, inventory, last_seen=now, registered_at=now)
        self._nodes[node_id] = record
        return record

    def heard(self, node_id: str, inventory: Inventory | None = None) -> None:
        """A frame arrived from the node; a heartbeat may carry a new inventory."""
        record = self._nodes.get(node_id)
        if record is None:
            return
        record.last_seen = self._clock()
        if inventory is not None:
            record.inventory = inventory

    def disconnected(self, node_id: str) -> None:
        record = self._nodes.get(node_id)
        if record is not None:
            record.connected = False

    def clear(self) -> None:
        """Forgets every node: a control plane that lost the lease sends its agents away."""
        self._nodes.clear()

    def get(self, node_id: str) -> NodeRecord | None:
        return self._nodes.get(node_id)

    def status(self, node_id: str) -> NodeStatus:
        """A node never seen counts as lost: nothing can be sent to it."""
        record = self._nodes.get(node_id)
        if record is None:
            return "lost"
        return node_status(
            self._clock() - record.last_seen,
            connected=record.connected,
            unreachable_after_s=self.unreachable_after_s,
            lost_after_s=self.lost_after_s,
        )

    def views(self) -> list[NodeView]:
        """Every node with its status now, by id."""
        return [
            NodeView(id=record.id, inventory=record.inventory, status=self.status(record.id))
            for record in sorted(self._nodes.values(), key=lambda r: r.id)
        ]
