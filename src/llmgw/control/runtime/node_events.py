"""`node.unreachable` and `node.lost`: a node's status is worked out from its silence
whenever asked (`NodeRegistry.status`), so nothing happens at the moment a node goes
quiet; `NodeWatch` looks once per reconcile pass and reports the nodes whose status
moved to unreachable or lost since the last look.

The event's key is the node and the moment it registered: the same silence seen again
(by this watch, or by a control plane that restarted and heard the node again) is the
same event, and a node that comes back and goes away again is a new one.
"""

from __future__ import annotations

from collections.abc import Mapping

from llmgw.control.decisions.nodes import NodeRegistry
from llmgw.core.events import EventSink

REPORTED = ("unreachable", "lost")


def changes(before: Mapping[str, str], now: Mapping[str, str]) -> list[tuple[str, str]]:
    """(node, status) for each node whose status is now one of `REPORTED` and was not
    that before."""
    return [
        (node, status)
        for node, status in sorted(now.items())
        if status in REPORTED and before.get(node) != status
    ]


class NodeWatch:
    def __init__(self, registry: NodeRegistry, events: EventSink) -> None:
        self._registry = registry
        self.events = events
        self._last: dict[str, str] = {}

    def look(self) -> None:
        """Reports every node that became unreachable or lost since the last look."""
        registry = self._registry
        now: dict[str, str] = {view.id: view.status for view in registry.views()}
        for node, status in changes(self._last, now):
            record = registry.get(node)
            if record is None:
                continue
            self.events.emit(
                f"node.{status}",
                f"{node}:{record.registered_at}",
                {
                    "node": node,
                    "hostname": record.inventory.hostname,
                    "last_seen": round(record.last_seen, 3),
                    "status": status,
                },
            )
        self._last = now
