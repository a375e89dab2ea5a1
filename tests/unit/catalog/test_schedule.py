"""Schedule windows: HH:MM parsing, windows across midnight and days, prewarm, and the
window in force. Times are always passed in; no clock is read."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmgw.catalog import ScaleWindow, Scaling, parse_clock

# 2025-06-02 is a Monday.
MONDAY = datetime(2025, 6, 2)


def at(day: int, hhmm: str) -> datetime:
    """A time `day` days after Monday 2 June 2025."""
    hours, minutes = hhmm.split(":")
    return MONDAY + timedelta(days=day, hours=int(hours), minutes=int(minutes))


def window(frm: str, to: str, days: tuple[str, ...] = (), low: int = 1, high: int = 0) -> ScaleWindow:
    return ScaleWindow.model_validate({"from": frm, "to": to, "days": days, "min": low, "max": high})


@pytest.mark.parametrize(
    ("text", "minutes"),
    [
        ("00:00", 0),
        ("08:30", 510),
        ("23:59", 1439),
        ("24:00", None),
        ("8:30", None),
        ("08:60", None),
        ("+8:30", None),
        ("0830", None),
        ("", None),
    ],
)
def test_parse_clock(text: str, minutes: int | None) -> None:
    assert parse_clock(text) == minutes


def test_working_hours() -> None:
    w = window("08:00", "18:00", ("weekdays",))
    assert not w.holds(at(0, "07:59"))
    assert w.holds(at(0, "08:00"))
    assert w.holds(at(0, "17:59"))
    assert not w.holds(at(0, "18:00"))
    assert w.holds(at(4, "12:00"))  # Friday
    assert not w.holds(at(5, "12:00"))  # Saturday


def test_across_midnight_belongs_to_the_day_it_starts() -> None:
    w = window("22:00", "06:00", ("fri",))
    assert w.holds(at(4, "23:00"))  # Friday night
    assert w.holds(at(5, "05:59"))  # Saturday morning, still Friday's window
    assert not w.holds(at(5, "06:00"))
    assert not w.holds(at(0, "01:00"))  # Monday morning: Sunday's window, which there is none of
    assert not w.holds(at(5, "23:00"))


def test_prewarm_opens_early_even_the_day_before() -> None:
    w = window("00:30", "06:00", ("tue",))
    assert not w.holds(at(0, "23:30"))
    assert w.holds(at(0, "23:30"), timedelta(hours=1))  # Monday night, for Tuesday's window
    assert not w.holds(at(0, "23:29"), timedelta(hours=1))
    assert not w.holds(at(1, "06:00"), timedelta(hours=1))  # the lead moves the start, not the end


def test_day_names_ignore_case() -> None:
    assert window("08:00", "09:00", ("Weekends",)).holds(at(6, "08:30"))
    assert window("08:00", "09:00", ("SUN",)).holds(at(6, "08:30"))


def test_time_zone_is_the_times_own() -> None:
    w = window("08:00", "18:00")
    paris = ZoneInfo("Europe/Paris")
    assert w.holds(datetime(2025, 6, 2, 9, 0, tzinfo=paris))
    assert not w.holds(datetime(2025, 6, 2, 5, 0, tzinfo=UTC))
    # Wall-clock time, also on the day the clocks change (30 March 2025 in Paris).
    assert w.holds(datetime(2025, 3, 30, 8, 0, tzinfo=paris))
    assert not w.holds(datetime(2025, 3, 30, 7, 59, tzinfo=paris))


def test_an_invalid_window_holds_never() -> None:
    assert not window("8am", "18:00").holds(at(0, "12:00"))
    assert not window("08:00", "08:00").holds(at(0, "08:00"))


def test_first_window_that_holds_wins() -> None:
    s = Scaling.model_validate(
        {
            "min": 0,
            "max": 4,
            "prewarm": "30m",
            "schedule": [
                {"days": ["weekdays"], "from": "08:00", "to": "18:00", "min": 2},
                {"from": "06:00", "to": "20:00", "min": 1, "max": 2},
            ],
        }
    )
    assert s.on_demand
    assert s.window(at(0, "07:30")) == s.schedule[0]  # prewarmed
    assert s.window(at(5, "07:30")) == s.schedule[1]
    assert s.window(at(0, "21:00")) is None
    assert s.bounds(at(0, "12:00")) == (2, 4)
    assert s.bounds(at(5, "12:00")) == (1, 2)
    assert s.bounds(at(0, "23:00")) == (0, 4)


def test_window_max_never_falls_below_its_min() -> None:
    s = Scaling.model_validate({"min": 1, "max": 1, "schedule": [{"from": "08:00", "to": "18:00", "min": 3}]})
    assert s.bounds(at(0, "09:00")) == (3, 3)


def test_on_demand() -> None:
    assert Scaling(max=1).on_demand
    assert not Scaling().on_demand  # configured and deliberately not running
    assert not Scaling(min=1, max=2).on_demand


clocks = st.builds(lambda m: f"{m // 60:02d}:{m % 60:02d}", st.integers(0, 24 * 60 - 1))
day_sets = st.lists(
    st.sampled_from(["mon", "tue", "wed", "thu", "fri", "sat", "sun", "weekdays", "weekends"]), max_size=3
)
times = st.datetimes(min_value=datetime(2020, 1, 1), max_value=datetime(2030, 1, 1))
leads = st.integers(0, 12 * 60).map(lambda m: timedelta(minutes=m))
windows = st.builds(lambda f, t, d: window(f, t, tuple(d)), clocks, clocks, day_sets).filter(
    lambda w: w.from_ != w.to
)


@settings(max_examples=150, deadline=None)
@given(windows, times, leads)
def test_a_window_repeats_every_week(w: ScaleWindow, t: datetime, lead: timedelta) -> None:
    assert w.holds(t, lead) == w.holds(t + timedelta(days=7), lead)


@settings(max_examples=150, deadline=None)
@given(windows, times, leads)
def test_prewarm_only_widens(w: ScaleWindow, t: datetime, lead: timedelta) -> None:
    if w.holds(t):
        assert w.holds(t, lead)


@settings(max_examples=150, deadline=None)
@given(windows, times, leads)
def test_prewarm_holds_lead_before_the_window(w: ScaleWindow, t: datetime, lead: timedelta) -> None:
    if w.holds(t):
        assert w.holds(t - lead, lead)


@settings(max_examples=150, deadline=None)
@given(clocks, clocks, st.integers(0, 6), st.integers(0, 59))
def test_across_midnight_holds_just_after_midnight(frm: str, to: str, weekday: int, after: int) -> None:
    start, end = parse_clock(frm), parse_clock(to)
    assert start is not None
    assert end is not None
    if not end < start:
        return
    name = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"][weekday]
    w = window(frm, to, (name,))
    next_midnight = MONDAY + timedelta(days=weekday + 1)
    just_after = next_midnight + timedelta(minutes=min(after, end - 1)) if end > 0 else None
    if just_after is not None:
        assert w.holds(just_after)
    assert not w.holds(next_midnight + timedelta(minutes=end))


@settings(max_examples=150, deadline=None)
@given(windows, times, st.integers(0, 24 * 60))
def test_a_window_holds_for_its_whole_length(w: ScaleWindow, t: datetime, into: int) -> None:
    start, end = parse_clock(w.from_), parse_clock(w.to)
    assert start is not None
    assert end is not None
    opened = datetime.combine(t.date(), datetime.min.time()) + timedelta(minutes=start)
    span = (end - start) % (24 * 60)
    if w.starts_on(opened.weekday()):
        assert w.holds(opened + timedelta(minutes=into % span))


@settings(max_examples=150, deadline=None)
@given(windows, times)
def test_a_window_holds_only_on_its_days_or_the_night_after(w: ScaleWindow, t: datetime) -> None:
    if w.holds(t):
        assert w.starts_on(t.weekday()) or w.starts_on((t - timedelta(days=1)).weekday())
