"""The sim's runtime adapters: vLLM's answers to loads and unloads, and the counters a
test reads to see a router overfill or double-load a replica."""

from __future__ import annotations

import pytest

from llmgw.sim.lora import LoraSlots
from llmgw.sim.protocol import ApiError


def test_loads_up_to_the_limit_then_refuses_and_counts() -> None:
    slots = LoraSlots(2)
    slots.load("a", "/a")
    slots.load("b", "/b")
    with pytest.raises(ApiError) as full:
        slots.load("c", "/c")
    assert full.value.status == 400
    assert "unload one first" in full.value.message
    with pytest.raises(ApiError) as twice:
        slots.load("a", "/a")
    assert "already been loaded" in twice.value.message
    state = slots.describe()
    assert state["held"] == ["a", "b"]
    assert state["refused_full"] == 1
    assert state["double_loads"] == 1
    assert state["peak"] == 2


def test_unloading_frees_a_slot_and_an_unknown_adapter_is_404() -> None:
    slots = LoraSlots(1)
    slots.load("a", "/a")
    slots.unload("a")
    slots.load("b", "/b")
    with pytest.raises(ApiError) as missing:
        slots.unload("a")
    assert missing.value.status == 404
    assert slots.describe()["loads"] == {"a": 1, "b": 1}
    assert slots.describe()["unloads"] == 1
