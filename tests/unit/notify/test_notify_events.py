"""An event's id names the occurrence, so the same occurrence emitted twice is one event;
its body is the documented JSON."""

from __future__ import annotations

import orjson

from llmgw.notify.events import Event, event_id


def test_the_same_occurrence_has_the_same_id_and_another_a_different_one() -> None:
    assert event_id("node.lost", "n1:100.0") == event_id("node.lost", "n1:100.0")
    assert event_id("node.lost", "n1:100.0") != event_id("node.lost", "n1:200.0")
    assert event_id("node.lost", "n1:100.0") != event_id("node.unreachable", "n1:100.0")
    assert event_id("node.lost", "x").startswith("evt_")


def test_the_body_is_id_type_time_cluster_and_data() -> None:
    event = Event.of("budget.spent", "team:a:day:0", {"scope": "team:a"}, now=12.5, cluster="prod")
    assert orjson.loads(event.body()) == {
        "id": event.id,
        "type": "budget.spent",
        "time": 12.5,
        "cluster": "prod",
        "data": {"scope": "team:a"},
    }


def test_cluster_is_left_out_where_none_is_named() -> None:
    assert "cluster" not in orjson.loads(Event.of("node.lost", "k", {}, now=1.0).body())
