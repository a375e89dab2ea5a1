"""The adapter bookkeeping: which replica holds what, least recently used first, and
what may be unloaded."""

from __future__ import annotations

from llmgw.router.lora_slots import AdapterSlots


def test_an_empty_replica_has_room_and_no_victim() -> None:
    slots = AdapterSlots()
    assert slots.has_room("r1", 2)
    assert slots.victim("r1", 2) is None
    assert slots.choose("a", ["r1", "r2"], 2) == ["r1", "r2"]


def test_requests_go_to_replicas_holding_the_adapter() -> None:
    slots = AdapterSlots()
    slots.loaded("r2", "a")
    assert slots.choose("a", ["r1", "r2"], 2) == ["r2"]
    assert slots.choose("b", ["r1", "r2"], 2) == ["r1", "r2"]


def test_the_least_recently_used_adapter_is_unloaded_first() -> None:
    slots = AdapterSlots()
    slots.loaded("r1", "a")
    slots.loaded("r1", "b")
    assert slots.victim("r1", 3) is None  # a slot is free
    assert slots.victim("r1", 2) == "a"
    slots.begin("r1", "a")  # using a makes b the older
    slots.end("r1", "a")
    assert slots.victim("r1", 2) == "b"
    assert slots.held("r1") == ["b", "a"]


def test_an_adapter_with_requests_in_flight_is_never_unloaded() -> None:
    slots = AdapterSlots()
    slots.loaded("r1", "a")
    slots.loaded("r1", "b")
    slots.begin("r1", "a")
    slots.begin("r1", "b")
    assert slots.victim("r1", 2) is None
    assert not slots.has_room("r1", 2)
    assert slots.choose("c", ["r1", "r2"], 2) == ["r2"]
    slots.begin("r1", "b")
    slots.end("r1", "b")
    assert not slots.has_room("r1", 2)  # b still has one in flight
    slots.end("r1", "b")
    assert slots.victim("r1", 2) == "b"


def test_a_forgotten_replica_holds_nothing_and_keeps_its_counts_balanced() -> None:
    slots = AdapterSlots()
    slots.loaded("r1", "a")
    slots.begin("r1", "a")
    slots.forget("r1")
    assert not slots.holds("r1", "a")
    assert slots.held("r1") == []
    slots.end("r1", "a")
    slots.loaded("r1", "a")
    assert slots.victim("r1", 1) == "a"


def test_unloading_frees_the_slot() -> None:
    slots = AdapterSlots()
    slots.loaded("r1", "a")
    slots.unloaded("r1", "a")
    assert not slots.holds("r1", "a")
    assert slots.victim("r1", 1) is None
    slots.unloaded("r9", "a")  # an unknown replica is no error
    slots.end("r9", "a")
