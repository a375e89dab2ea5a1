"""Desired replica counts: floors and ceilings from scaling, schedule windows read in the
control plane's zone (across midnight, opened early by prewarm), on-demand models
wanted while asked for and idle after their timeout."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from control_world import NOW, UTC_ZONE, catalog, gpu_profile, model

from llmgw.catalog import Model
from llmgw.control.decisions.cluster import ModelDemand
from llmgw.control.decisions.desired import DEFAULT_IDLE_TIMEOUT, desired, placeable

NO_DEMAND = ModelDemand()


def one(**fields: Any) -> Model:
    first: Model = catalog(model("m", gpu_profile(), **fields)).models()[0]
    return first


def at(text: str) -> float:
    """A UTC time on Monday 2 June 2025 or after: `tue 23:30`."""
    day, hhmm = text.split()
    days = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"].index(day)
    hours, minutes = map(int, hhmm.split(":"))
    return datetime(2025, 6, 2 + days, hours, minutes, tzinfo=UTC).timestamp()


def test_min_and_max_bound_the_count() -> None:
    d = desired(one(min=2, max=4), NO_DEMAND, NOW, UTC_ZONE)
    assert (d.floor, d.ceiling, d.surplus_reason) == (2, 4, "scale_down")
    assert "min 2, max 4" in d.why


def test_min_0_max_0_is_configured_and_not_running() -> None:
    d = desired(one(min=0, max=0), ModelDemand(waiting=True), NOW, UTC_ZONE)
    assert (d.floor, d.ceiling) == (0, 0)
    assert "configured and not running" in d.why


def test_on_demand_is_wanted_while_a_request_waits() -> None:
    m = one(min=0, max=2)
    assert desired(m, ModelDemand(waiting=True), NOW, UTC_ZONE).floor == 1
    assert (desired(m, NO_DEMAND, NOW, UTC_ZONE).floor, desired(m, NO_DEMAND, NOW, UTC_ZONE).ceiling) == (
        0,
        0,
    )


def test_on_demand_is_kept_within_its_idle_timeout_and_idle_after() -> None:
    m = one(min=0, max=2, scaling={"idle_timeout": "10m"})
    recent = desired(m, ModelDemand(last_request_at=NOW - 9 * 60), NOW, UTC_ZONE)
    assert (recent.floor, recent.ceiling) == (0, 2)
    stale = desired(m, ModelDemand(last_request_at=NOW - 11 * 60), NOW, UTC_ZONE)
    assert (stale.floor, stale.ceiling, stale.surplus_reason) == (0, 0, "idle")
    assert "idle timeout of 10m" in stale.why


def test_the_clusters_idle_timeout_applies_where_the_model_gives_none() -> None:
    m = one(min=0, max=1)
    just_inside = NOW - DEFAULT_IDLE_TIMEOUT.total_seconds() + 1
    assert desired(m, ModelDemand(last_request_at=just_inside), NOW, UTC_ZONE).ceiling == 1
    shorter = desired(m, ModelDemand(last_request_at=just_inside), NOW, UTC_ZONE, timedelta(minutes=1))
    assert shorter.ceiling == 0


def window(frm: str, to: str, low: int, high: int = 0, days: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"from": frm, "to": to, "min": low, "max": high, "days": list(days)}


def test_a_window_across_midnight_holds_into_the_next_day() -> None:
    m = one(min=1, max=1, scaling={"schedule": [window("22:00", "02:00", 3, days=("mon",))]})
    assert desired(m, NO_DEMAND, at("mon 23:00"), UTC_ZONE).floor == 3
    assert desired(m, NO_DEMAND, at("tue 01:30"), UTC_ZONE).floor == 3
    after = desired(m, NO_DEMAND, at("tue 02:00"), UTC_ZONE)
    assert (after.floor, after.surplus_reason) == (1, "outside_schedule")


def test_prewarm_opens_the_window_early() -> None:
    m = one(min=0, max=2, scaling={"schedule": [window("09:00", "17:00", 2)], "prewarm": "30m"})
    assert desired(m, NO_DEMAND, at("mon 08:29"), UTC_ZONE).floor == 0
    early = desired(m, NO_DEMAND, at("mon 08:31"), UTC_ZONE)
    assert early.floor == 2
    assert "prewarm 30m" in early.why


@pytest.mark.parametrize(("utc", "floor"), [("mon 06:30", 2), ("mon 09:30", 1)])
def test_windows_are_read_in_the_control_planes_zone(utc: str, floor: int) -> None:
    # 08:00-12:00 in Istanbul (UTC+3) is 05:00-09:00 UTC.
    m = one(min=1, max=3, scaling={"schedule": [window("08:00", "12:00", 2)]})
    assert desired(m, NO_DEMAND, at(utc), ZoneInfo("Europe/Istanbul")).floor == floor


def test_external_and_router_only_models_are_not_placed() -> None:
    ext = catalog(
        {
            "name": "gpt",
            "source": "openai/gpt-4o-mini",
            "external": {"url": "https://api.openai.com", "model": "gpt-4o-mini", "api_key_file": "/k"},
        }
    ).models()[0]
    assert not placeable(ext)
    assert placeable(one(min=1))
