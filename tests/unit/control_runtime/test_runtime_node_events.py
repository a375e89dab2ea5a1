"""node.unreachable and node.lost are reported once per change of a node's status, with
an id that names the node's registration (so a second look reports nothing new)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runtime_world import inventory

from llmgw.control.decisions.backoff import Backoff
from llmgw.control.decisions.nodes import NodeRegistry
from llmgw.control.runtime.node_events import NodeWatch, changes


class Recorded:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, dict[str, Any]]] = []

    def emit(self, event_type: str, key: str, data: Mapping[str, Any]) -> None:
        self.events.append((event_type, key, dict(data)))


def test_changes_reports_only_moves_into_unreachable_or_lost() -> None:
    before = {"a": "ready", "b": "unreachable", "c": "lost", "d": "ready"}
    now = {"a": "unreachable", "b": "lost", "c": "lost", "d": "ready", "e": "unreachable"}
    assert changes(before, now) == [("a", "unreachable"), ("b", "lost"), ("e", "unreachable")]


def test_a_silent_node_is_reported_unreachable_then_lost_once_each() -> None:
    clock = [1000.0]
    registry = NodeRegistry(unreachable_after_s=4, lost_after_s=10, clock=lambda: clock[0])
    registry.registered("n1", inventory())
    sink = Recorded()
    watch = NodeWatch(registry, sink)
    watch.look()
    assert sink.events == []
    clock[0] += 5
    watch.look()
    watch.look()
    clock[0] += 6
    watch.look()
    watch.look()
    assert [(t, k) for t, k, _ in sink.events] == [
        ("node.unreachable", "n1:1000.0"),
        ("node.lost", "n1:1000.0"),
    ]
    assert sink.events[1][2] == {"node": "n1", "hostname": "node", "last_seen": 1000.0, "status": "lost"}


def test_a_model_is_parked_once_its_wait_reaches_the_longest() -> None:
    backoff = Backoff(base_s=1, max_s=4)
    parked = []
    for now in range(4):
        backoff.failed("m", float(now))
        parked.append(backoff.holds_longest("m"))
    assert parked == [False, False, True, True]
    backoff.succeeded("m")
    assert not backoff.holds_longest("m")
