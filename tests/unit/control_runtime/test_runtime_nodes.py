"""Node health from silence, with a clock the test moves."""

from __future__ import annotations

from runtime_world import Clock, inventory

from llmgw.control.decisions.nodes import NodeRegistry, node_status


def registry(clock: Clock) -> NodeRegistry:
    return NodeRegistry(unreachable_after_s=15, lost_after_s=60, clock=clock)


def test_a_heartbeating_node_is_ready_then_unreachable_then_lost_as_it_falls_silent() -> None:
    clock = Clock()
    nodes = registry(clock)
    nodes.registered("n1", inventory())
    assert nodes.status("n1") == "ready"
    clock.advance(14.9)
    assert nodes.status("n1") == "ready"
    clock.advance(0.1)
    assert nodes.status("n1") == "unreachable"
    clock.advance(44.9)
    assert nodes.status("n1") == "unreachable"
    clock.advance(0.1)
    assert nodes.status("n1") == "lost"


def test_a_heartbeat_brings_an_unreachable_node_back() -> None:
    clock = Clock()
    nodes = registry(clock)
    nodes.registered("n1", inventory())
    clock.advance(20)
    assert nodes.status("n1") == "unreachable"
    nodes.heard("n1")
    assert nodes.status("n1") == "ready"


def test_a_closed_connection_is_unreachable_at_once_and_lost_only_after_lost_after() -> None:
    clock = Clock()
    nodes = registry(clock)
    nodes.registered("n1", inventory())
    nodes.disconnected("n1")
    assert nodes.status("n1") == "unreachable"
    clock.advance(59)
    assert nodes.status("n1") == "unreachable"
    clock.advance(1)
    assert nodes.status("n1") == "lost"
    # Registering again (a new connection) makes it ready.
    nodes.registered("n1", inventory())
    assert nodes.status("n1") == "ready"


def test_a_heartbeat_may_carry_a_new_inventory_and_views_list_every_node_by_id() -> None:
    clock = Clock()
    nodes = registry(clock)
    nodes.registered("b", inventory(cores=4))
    nodes.registered("a", inventory(cores=4))
    nodes.heard("b", inventory(cores=16))
    views = nodes.views()
    assert [v.id for v in views] == ["a", "b"]
    assert views[1].inventory.cpu_cores == 16
    assert nodes.status("never-seen") == "lost"


def test_node_status_is_a_pure_reading_of_silence() -> None:
    kw = {"unreachable_after_s": 15.0, "lost_after_s": 60.0}
    assert node_status(0, connected=True, **kw) == "ready"
    assert node_status(0, connected=False, **kw) == "unreachable"
    assert node_status(15, connected=True, **kw) == "unreachable"
    assert node_status(60, connected=True, **kw) == "lost"
