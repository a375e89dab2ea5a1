"""How many replicas a model should have, and how that changes by the time of week.

`min` replicas are kept running; load may add up to `max`. `min: 0` with `max` above it
is a model loaded when someone asks for it; `min: 0, max: 0` is a model that is
configured and deliberately not running, a different statement that must stay distinct.

A schedule window changes min and max for part of the week in the control plane's time
zone: more replicas through working hours, an on-demand model kept warm while people
are at work. Windows are wall-clock times: a window from 08:00 opens at 08:00 on the day
the clocks change too, because the people it is for arrive by the clock. The time is
always passed in, never read here, so every rule is a pure function of its inputs.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from datetime import time as clock_time

from pydantic import ConfigDict, Field

from llmgw.catalog.quoting import q
from llmgw.core.durations import Duration
from llmgw.core.strict import Strict

_HHMM = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$")
_DAY = timedelta(days=1)

WEEKDAYS: dict[str, tuple[int, ...]] = {
    "mon": (0,),
    "tue": (1,),
    "wed": (2,),
    "thu": (3,),
    "fri": (4,),
    "sat": (5,),
    "sun": (6,),
    "weekdays": (0, 1, 2, 3, 4),
    "weekends": (5, 6),
}
"""Day names a window may use, as Python's weekday numbers (Monday is 0)."""

MAX_PREWARM = timedelta(hours=12)


def parse_clock(text: str) -> int | None:
    """`08:30` as minutes past midnight (510); None for anything not HH:MM in 00:00–23:59."""
    m = _HHMM.match(text)
    if m is None:
        return None
    return int(m.group(1)) * 60 + int(m.group(2))


class ScaleWindow(Strict):
    """A part of the week with its own min and max."""

    model_config = ConfigDict(validate_by_name=True, validate_by_alias=True, serialize_by_alias=True)

    days: tuple[str, ...] = ()
    """mon … sun, weekdays or weekends; empty is every day. The day a window starts on."""
    from_: str = Field("", alias="from")
    """HH:MM the window opens."""
    to: str = ""
    """HH:MM it closes; earlier than from is a window running past midnight."""
    min: int = 0
    max: int = 0
    """The window's ceiling for load scaling; 0 keeps the model's own."""

    def problems(self) -> list[str]:
        """What is wrong with the window, as sentence tails naming the field and the fix."""
        out: list[str] = []
        start, end = parse_clock(self.from_), parse_clock(self.to)
        if start is None or end is None:
            out.append(f"from {q(self.from_)} and to {q(self.to)} are each HH:MM, like 08:00 and 18:30")
        elif start == end:
            out.append(
                f"from and to are both {self.from_}; a window needs a length (use 00:00 to 23:59 for all day)"
            )
        for day in self.days:
            if day.lower() not in WEEKDAYS:
                out.append(f"day {q(day)} is not mon, tue, wed, thu, fri, sat, sun, weekdays or weekends")
        if self.min < 0 or self.max < 0 or 0 < self.max < self.min:
            out.append(f"min {self.min} and max {self.max}: both are 0 or more, and max is 0 or at least min")
        return out

    def starts_on(self, weekday: int) -> bool:
        """Whether the window opens on this weekday (Monday is 0)."""
        if not self.days:
            return True
        return any(weekday in WEEKDAYS.get(day.lower(), ()) for day in self.days)

    def holds(self, at: datetime, lead: timedelta = timedelta(0)) -> bool:
        """Whether `at` falls in the window, opened `lead` early. An invalid window holds never."""
        start, end = parse_clock(self.from_), parse_clock(self.to)
        if start is None or end is None or start == end:
            return False
        span = end - start if end > start else end - start + 24 * 60
        local = at.replace(tzinfo=None)
        midnight = datetime.combine(local.date(), clock_time())
        # Yesterday's opening may run past midnight into today, and tomorrow's may be
        # pulled into today by the lead; 12h of lead at most keeps it to these three.
        for offset in (-1, 0, 1):
            day = midnight + offset * _DAY
            if not self.starts_on(day.weekday()):
                continue
            opens = day + timedelta(minutes=start) - lead
            closes = day + timedelta(minutes=start + span)
            if opens <= local < closes:
                return True
        return False


class Scaling(Strict):
    """How many replicas a model should have."""

    min: int = 0
    max: int = 0
    idle_timeout: Duration = timedelta(0)
    """How long an on-demand model may go unasked for before its replicas stop; 0 takes the
    cluster's default. Minutes, not seconds: a stopped replica throws away the KV cache the
    router filled, which only an idle period that long is worth."""
    schedule: tuple[ScaleWindow, ...] = ()
    """The first window that holds wins; outside them all, min and max apply."""
    prewarm: Duration = timedelta(0)
    """Opens every window this much early, so its replicas have loaded when it starts."""

    @property
    def on_demand(self) -> bool:
        """Whether the model is loaded only when someone asks for it."""
        return self.min == 0 and self.max > 0

    def window(self, at: datetime) -> ScaleWindow | None:
        """The window in force at `at` (in its own time zone), or None outside them all."""
        for w in self.schedule:
            if w.holds(at, self.prewarm):
                return w
        return None

    def bounds(self, at: datetime) -> tuple[int, int]:
        """The min and max in force at `at`: the window's, its max falling back to the
        model's (and never below the window's min), or the model's own outside them all."""
        w = self.window(at)
        if w is None:
            return self.min, self.max
        return w.min, w.max or max(self.max, w.min)
