"""The canaries of a gateway: the split in force, judged per try, rolled back at once
and bounded, recorded with its figures and event, reset only by an operator."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from llmgw.catalog import Catalog, Model
from llmgw.router.canary import ROLLED_BACK_EVENT, Canaries, explain_lines


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Events:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, Mapping[str, Any]]] = []

    def emit(self, event_type: str, key: str, data: Mapping[str, Any]) -> None:
        self.seen.append((event_type, key, data))


def _catalog(percent: int = 10, **canary: Any) -> Catalog:
    return Catalog.build(
        [
            Model(name="chat", canary={"model": "chat-next", "percent": percent, **canary}),
            Model(name="chat-next"),
            Model(name="other"),
        ],
        served_statically=("chat", "chat-next", "other"),
    )


def _canaries(catalog: Catalog | None = None) -> tuple[Canaries, Clock, Events]:
    clock, events = Clock(), Events()
    canaries = Canaries(catalog or _catalog(), clock, wall_clock=lambda: 1_700_000_000.0)
    canaries.events = events
    return canaries, clock, events


def _serve(canaries: Canaries, clock: Clock, n: int, *, candidate_error_every: int = 0) -> int:
    """Sends `n` requests of chat one after another; returns how many the candidate got."""
    got = 0
    for _ in range(n):
        clock.now += 0.01
        side = canaries.choose("chat", None)
        if side == "chat-next":
            got += 1
            error = candidate_error_every > 0 and got % candidate_error_every == 0
            canaries.observed("chat-next", error=error, ttft_s=None if error else 0.1)
        else:
            canaries.observed("chat", error=False, ttft_s=0.1)
    return got


def test_a_model_without_a_canary_is_never_split() -> None:
    canaries, _, _ = _canaries()
    assert all(canaries.choose("other", None) is None for _ in range(200))


def test_a_healthy_candidate_keeps_its_share() -> None:
    canaries, clock, events = _canaries()
    assert _serve(canaries, clock, 2000) == 200
    described = canaries.describe("chat")
    assert described is not None
    assert (described["state"], described["percent_in_force"]) == ("running", 10)
    assert events.seen == []


def test_errors_roll_the_candidate_back_at_the_threshold_and_for_good() -> None:
    canaries, clock, events = _canaries()
    got = _serve(canaries, clock, 5000, candidate_error_every=5)
    # Rolled back on the try that brought it to min_requests (50), not one later.
    assert got == 50
    described = canaries.describe("chat")
    assert described is not None
    assert described["state"] == "rolled_back"
    assert described["percent_in_force"] == 0
    rollback = described["rollback"]
    assert rollback["reason"] == "error_rate"
    assert rollback["candidate_side"]["requests"] == 50
    assert rollback["candidate_side"]["error_rate"] == pytest.approx(0.2)
    assert rollback["model_side"]["error_rate"] == 0
    assert canaries.rollbacks == {("chat", "chat-next", "error_rate"): 1}
    [(kind, _, data)] = events.seen
    assert kind == ROLLED_BACK_EVENT
    assert (data["model"], data["candidate"], data["reason"]) == ("chat", "chat-next", "error_rate")
    assert any("canary-reset chat" in line for line in explain_lines({**described}))


def test_tries_already_under_way_are_all_that_reach_it_after() -> None:
    """Bounded: with 2 candidate requests in flight when the threshold is crossed, those
    are all that reach it after (within 5 % of what it had served), none is sent later."""
    canaries, clock, _ = _canaries(_catalog(percent=50))
    in_flight: list[int] = []
    sent = 0
    for _ in range(1000):
        clock.now += 0.01
        if canaries.choose("chat", None) == "chat-next":
            sent += 1
            in_flight.append(sent)
        if len(in_flight) > 2:  # each answer comes back two candidate requests later
            number = in_flight.pop(0)
            canaries.observed("chat-next", error=number % 5 == 0, ttft_s=0.1)
        canaries.observed("chat", error=False, ttft_s=0.1)
    described = canaries.describe("chat")
    assert described is not None
    assert described["rollback"] is not None
    decided_at = described["rollback"]["candidate_side"]["requests"]
    assert decided_at == 50
    after = sent - decided_at
    assert after == len(in_flight) + described["candidate_tries_after_rollback"] == 2
    assert after <= 0.05 * decided_at


def test_a_slow_candidate_is_rolled_back_on_ttft() -> None:
    canaries, clock, _ = _canaries()
    for _ in range(2000):
        clock.now += 0.01
        side = canaries.choose("chat", None) or "chat"
        canaries.observed(side, error=False, ttft_s=0.3 if side == "chat-next" else 0.1)
    described = canaries.describe("chat")
    assert described is not None
    assert described["rollback"]["reason"] == "ttft"
    assert described["sent_to_candidate"] == 50


def test_only_an_operator_brings_it_back() -> None:
    canaries, clock, _ = _canaries()
    _serve(canaries, clock, 1000, candidate_error_every=5)
    clock.now += 10_000  # the window empties; the rollback holds all the same
    assert _serve(canaries, clock, 1000) == 0
    reset = canaries.reset("chat")
    assert reset is not None
    assert (reset["state"], reset["percent_in_force"], reset["candidate_side"]["requests"]) == (
        "running",
        10,
        0,
    )
    assert _serve(canaries, clock, 100) == 10
    assert canaries.reset("other") is None


def test_a_catalog_change_keeps_an_unchanged_canary_and_restarts_a_changed_one() -> None:
    canaries, clock, _ = _canaries()
    _serve(canaries, clock, 1000, candidate_error_every=5)
    canaries.replace(_catalog())
    assert canaries.describe("chat") is not None
    assert canaries.describe("chat")["state"] == "rolled_back"  # type: ignore[index]
    canaries.replace(_catalog(percent=20))
    assert canaries.describe("chat")["state"] == "running"  # type: ignore[index]
    assert _serve(canaries, clock, 100) == 20
    canaries.replace(Catalog.build([Model(name="chat")], served_statically=("chat",)))
    assert canaries.describe("chat") is None
    assert canaries.choose("chat", None) is None


def test_a_session_is_sent_to_one_side_every_time() -> None:
    canaries, _, _ = _canaries(_catalog(percent=50))
    for session in ("alpha", "beta", "gamma", "delta"):
        sides = {canaries.choose("chat", session) for _ in range(20)}
        assert len(sides) == 1
