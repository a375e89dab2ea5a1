"""Start and stop orders: what they carry, and that one replica always gives one order."""

from __future__ import annotations

from datetime import timedelta

from runtime_world import catalog, sim_model

from llmgw.control.decisions.cluster import Assignment
from llmgw.control.decisions.orders import engine_key, rendezvous_port, start_order, stop_order
from llmgw.control.decisions.replicas import ReplicaBook


def test_a_start_order_carries_the_resolved_profile_and_the_engine_key() -> None:
    cat = catalog(sim_model("chat", min=1, context_length=4096))
    model = cat.resolve("chat")
    assert model is not None
    book = ReplicaBook(lambda: 0.0)
    record = book.ordered("chat-1", "chat", "sim", [Assignment("n1")])
    order = start_order(model, record, record.parts[0], api_key="k", port_range=(20000, 20999))
    assert order is not None
    assert order.replica_id == "chat-1"
    assert order.model == "chat"
    assert order.profile.engine == "sim"
    assert order.profile.served_model_name == "chat"
    assert order.context_length == 4096
    assert order.api_key == "k"
    assert order.ports == ()  # the agent picks free ones
    assert order.node_rank == 0
    assert order.dist_port == 0
    assert order.master_address == ""


def test_the_same_replica_gives_the_same_order_every_time() -> None:
    cat = catalog(sim_model("chat", min=1))
    model = cat.resolve("chat")
    assert model is not None
    book = ReplicaBook(lambda: 0.0)
    record = book.ordered("chat-1", "chat", "sim", [Assignment("n1")])
    first = start_order(model, record, record.parts[0], api_key="k", port_range=(20000, 20999))
    again = start_order(model, record, record.parts[0], api_key="k", port_range=(20000, 20999))
    assert first == again


def test_a_profile_gone_from_the_catalog_gives_no_order() -> None:
    cat = catalog(sim_model("chat", min=1))
    model = cat.resolve("chat")
    assert model is not None
    record = ReplicaBook(lambda: 0.0).ordered("chat-1", "chat", "renamed", [Assignment("n1")])
    assert start_order(model, record, record.parts[0], api_key="", port_range=(20000, 20999)) is None


def test_engine_keys_are_stable_per_replica_and_secret_and_empty_without_a_secret() -> None:
    assert engine_key(b"s", "r1") == engine_key(b"s", "r1")
    assert engine_key(b"s", "r1") != engine_key(b"s", "r2")
    assert engine_key(b"s", "r1") != engine_key(b"t", "r1")
    assert len(engine_key(b"s", "r1")) == 64
    assert engine_key(b"", "r1") == ""


def test_the_rendezvous_port_lies_in_the_upper_half_of_the_range_and_is_fixed_by_the_id() -> None:
    for rid in ("a", "b", "chat-7f3a", "x" * 60):
        port = rendezvous_port(rid, (20000, 20999))
        assert 20500 <= port <= 20999
        assert port == rendezvous_port(rid, (20000, 20999))
    assert rendezvous_port("a", (30000, 30000)) == 30000


def test_a_stop_order_carries_the_drain() -> None:
    order = stop_order("r1", timedelta(seconds=10))
    assert order.replica_id == "r1"
    assert order.drain == timedelta(seconds=10)
    assert stop_order("r1").drain == timedelta(0)
