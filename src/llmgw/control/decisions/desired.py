"""How many replicas each model should have right now.

A model's scaling gives a floor and a ceiling; a schedule window in force (in the
control plane's time zone, opened `prewarm` early) replaces both. Between them the
count is load scaling's (`load_scaling`, carried in the demand) where it holds one, and
otherwise left where it is: replicas above the floor are kept until they pass the
ceiling. An on-demand model (floor 0, ceiling above it)
is wanted once while a request waits for it and kept while it was asked for within
its idle timeout; min 0 and max 0 is a model configured and deliberately not running.

Pure: the time, the zone and the demand are passed in.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

from llmgw.catalog import Model
from llmgw.control.decisions.cluster import ModelDemand

DEFAULT_IDLE_TIMEOUT = timedelta(minutes=30)
"""An on-demand model's idle timeout when neither it nor the cluster gives one:
long enough that the KV cache a stop throws away was not worth more than the cards."""

SurplusReason = Literal["scale_down", "idle", "outside_schedule"]


@dataclass(frozen=True, slots=True)
class Desired:
    """What one model should have: at least `floor` live replicas, at most `ceiling`;
    surplus above the ceiling is stopped for `surplus_reason`. `why` says how the
    numbers came about, in a sentence for `ctl explain`."""

    model: str
    floor: int
    ceiling: int
    surplus_reason: SurplusReason
    why: str


def placeable(model: Model) -> bool:
    """Whether the control plane places replicas of this model at all: an external
    model is someone else's, and one without profiles is served by static endpoints."""
    return model.external is None and bool(model.profiles)


def desired(
    model: Model,
    demand: ModelDemand,
    now: float,
    tz: ZoneInfo,
    default_idle_timeout: timedelta = DEFAULT_IDLE_TIMEOUT,
) -> Desired:
    """The floor and ceiling of `model` at unix time `now`, read in zone `tz`."""
    scaling = model.scaling
    local = datetime.fromtimestamp(now, UTC).astimezone(tz)
    window = scaling.window(local)
    low, high = scaling.bounds(local)
    if window is not None:
        source = f"schedule window {window.from_}-{window.to}" + (
            f" (prewarm {_duration(scaling.prewarm)})" if scaling.prewarm > timedelta(0) else ""
        )
    else:
        source = "scaling" + (" (outside its schedule windows)" if scaling.schedule else "")
    # Leaving a window is the schedule's doing, and is reported as such.
    shrink: SurplusReason = "outside_schedule" if scaling.schedule and window is None else "scale_down"
    if low == 0 and high == 0:
        return Desired(model.name, 0, 0, shrink, f"{source}: min 0 and max 0, configured and not running")
    if low > 0:
        return _on_load(Desired(model.name, low, high, shrink, f"{source}: min {low}, max {high}"), demand)
    # On demand: wanted while asked for, and only then.
    idle_timeout = scaling.idle_timeout if scaling.idle_timeout > timedelta(0) else default_idle_timeout
    if demand.waiting:
        return _on_load(
            Desired(model.name, 1, high, shrink, f"{source}: on demand, and a request waits for it"), demand
        )
    last = demand.last_request_at
    if last is not None and now - last < idle_timeout.total_seconds():
        ago = _duration(timedelta(seconds=max(now - last, 0)))
        return _on_load(
            Desired(
                model.name,
                0,
                high,
                shrink,
                f"{source}: on demand, last asked for {ago} ago, within its idle timeout of"
                f" {_duration(idle_timeout)}",
            ),
            demand,
        )
    unasked = "never asked for" if last is None else f"unasked for {_duration(timedelta(seconds=now - last))}"
    return Desired(
        model.name,
        0,
        0,
        "idle",
        f"{source}: on demand, {unasked}, past its idle timeout of {_duration(idle_timeout)}",
    )


def _on_load(want: Desired, demand: ModelDemand) -> Desired:
    """`want` held at load scaling's count, kept within its floor and ceiling (a window
    that changed since the count was set wins); an on-demand model keeps its floor of 0
    below the count, so it still stops when idle."""
    target = demand.load_target
    if target is None or want.ceiling < 2:
        return want
    count = min(max(target, want.floor, 1), want.ceiling)
    floor = count if want.floor > 0 or count > 1 else want.floor
    return Desired(
        want.model,
        floor,
        count,
        want.surplus_reason,
        f"{want.why}; {demand.load_why}" if demand.load_why else want.why,
    )


def _duration(span: timedelta) -> str:
    """A span as a person says it: 45s, 12m, 2h30m."""
    seconds = int(span.total_seconds())
    if seconds < 60:
        return f"{seconds}s"
    minutes, _ = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    if hours == 0:
        return f"{minutes}m"
    return f"{hours}h{minutes}m" if minutes else f"{hours}h"
