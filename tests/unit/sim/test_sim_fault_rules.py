"""Fault decisions: explicit mode, `after` requests pass first, duration lapses."""

from __future__ import annotations

import pytest

from llmgw.sim.faults import Action, FaultSetting, FaultState
from llmgw.sim.options import FaultMode


def test_no_fault_serves_everything() -> None:
    state = FaultState(FaultSetting(), now=0.0)
    assert [state.on_request(0.0) for _ in range(3)] == [Action.SERVE] * 3


@pytest.mark.parametrize(
    ("mode", "action"),
    [
        (FaultMode.HTTP_500, Action.STATUS),
        (FaultMode.HTTP_503, Action.STATUS),
        (FaultMode.HTTP_429, Action.STATUS),
        (FaultMode.HANG_HEADERS, Action.HANG_HEADERS),
        (FaultMode.HANG_STREAM, Action.HANG_STREAM),
        (FaultMode.CUT_STREAM, Action.CUT_STREAM),
        (FaultMode.EXIT_AFTER, Action.EXIT),
        (FaultMode.REFUSE, Action.REFUSE),
    ],
)
def test_the_first_after_requests_pass_then_the_fault_applies(mode: FaultMode, action: Action) -> None:
    state = FaultState(FaultSetting(mode=mode, after=2), now=0.0)
    assert [state.on_request(0.0) for _ in range(4)] == [Action.SERVE, Action.SERVE, action, action]


def test_switching_the_fault_restarts_the_count() -> None:
    state = FaultState(FaultSetting(mode=FaultMode.HTTP_500, after=1), now=0.0)
    state.on_request(0.0)
    state.set(FaultSetting(mode=FaultMode.HTTP_503, after=1), now=1.0)
    assert state.on_request(1.0) is Action.SERVE
    assert state.on_request(1.0) is Action.STATUS


def test_a_fault_with_a_duration_lapses_back_to_none() -> None:
    state = FaultState(FaultSetting(mode=FaultMode.HTTP_500, duration_s=2.0), now=10.0)
    assert state.expires_at == 12.0
    assert state.on_request(11.9) is Action.STATUS
    assert state.on_request(12.0) is Action.SERVE
    assert state.setting.mode is FaultMode.NONE


def test_exit_after_is_due_once_its_quota_is_served() -> None:
    state = FaultState(FaultSetting(mode=FaultMode.EXIT_AFTER, after=2), now=0.0)
    assert state.on_request(0.0) is Action.SERVE
    assert state.on_served(0.0) is False
    assert state.on_request(0.0) is Action.SERVE
    assert state.on_served(0.0) is True


def test_served_requests_do_not_trigger_an_exit_under_other_faults() -> None:
    state = FaultState(FaultSetting(mode=FaultMode.HTTP_500, after=1), now=0.0)
    state.on_request(0.0)
    assert state.on_served(0.0) is False


def test_describe_is_what_the_admin_api_shows() -> None:
    setting = FaultSetting(mode=FaultMode.CUT_STREAM, after=3, stream_tokens=2)
    assert setting.describe() == {"mode": "cut-stream", "after": 3, "stream_tokens": 2, "duration_s": None}
