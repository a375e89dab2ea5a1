"""Durations written the way the settings have always been written: `30s`, `10m`,
`1h30m`, `250ms`.

Days (`7d`) are read only where a caller asks for them: the command line's `--since`
and `--ttl`, which docs/auth.md writes in days. The settings keep the seed's Go
grammar, which has no day (a day is not always 24 hours, so Go leaves it out); the
command line turns `7d` into `168h` before it sends it.

A bare number is refused rather than guessed at: the seed's loader read `30` as thirty
nanoseconds, and a timeout of thirty nanoseconds is an outage that looks like a config
that loaded fine.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer

_UNIT_SECONDS: dict[str, float] = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
}
MAX_DURATION_S = 100 * 365.25 * 86_400
"""The longest duration anything takes: a hundred years. Longer ones are typing slips,
and past timedelta's range they were crashes (an OverflowError where a sentence was due)."""
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h|d)")
_FORM = "write it like 30s, 10m, 1h30m or 250ms"
_FORM_WITH_DAYS = "write it like 30m, 24h, 7d or 1d12h"


def parse_duration(text: str, *, days: bool = False) -> timedelta:
    """Parses `1h30m`, `250ms`, `-5s` or `0` (and `7d`, `1d12h` with `days`); raises
    ValueError naming the expected form."""
    form = _FORM_WITH_DAYS if days else _FORM
    s = text.strip()
    sign = 1.0
    if s[:1] in "+-" and s:
        sign = -1.0 if s[0] == "-" else 1.0
        s = s[1:]
    if s == "0":
        return timedelta(0)
    total = 0.0
    pos = 0
    while pos < len(s):
        m = _PART.match(s, pos)
        if m is None:
            raise ValueError(f"{text!r} is not a duration: {form}")
        if m.group(2) == "d" and not days:
            raise ValueError(f"{text!r}: days are not taken here; write them as hours, like 168h for 7d")
        total += float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
        pos = m.end()
    if pos == 0:
        raise ValueError(f"{text!r} is not a duration: {form}")
    if not total <= MAX_DURATION_S:  # also catches inf, from a number of 400 digits
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise ValueError(f"{shown!r} is longer than a hundred years: give a shorter duration, like 8760h")
    return timedelta(seconds=sign * total)


def format_duration(value: timedelta) -> str:
    """Writes a duration the way `parse_duration` reads it, shortest form first:
    `1h30m`, `90s` becomes `1m30s`, `0.25s` becomes `250ms`."""
    micros = round(value / timedelta(microseconds=1))
    if micros == 0:
        return "0s"
    sign = "-" if micros < 0 else ""
    micros = abs(micros)
    if micros < 1_000_000:
        if micros % 1000 == 0:
            return f"{sign}{micros // 1000}ms"
        return f"{sign}{micros}us"
    hours, rest = divmod(micros, 3_600_000_000)
    minutes, rest = divmod(rest, 60_000_000)
    out = sign
    if hours:
        out += f"{hours}h"
    if minutes:
        out += f"{minutes}m"
    if rest:
        seconds = rest / 1_000_000
        out += f"{seconds:g}s" if rest % 1_000_000 else f"{rest // 1_000_000}s"
    return out


def _coerce(value: Any) -> Any:
    if isinstance(value, timedelta):
        return value
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration: write it like 30s, 10m, 1h30m or 250ms")
    if isinstance(value, int | float):
        if value == 0:
            return timedelta(0)
        raise ValueError(f"{value!r} has no unit: write it like {value}s, {value}m or {value}ms")
    if isinstance(value, str):
        return parse_duration(value)
    raise ValueError(f"{value!r} is not a duration: write it like 30s, 10m, 1h30m or 250ms")


Duration = Annotated[
    timedelta,
    BeforeValidator(_coerce),
    PlainSerializer(format_duration, return_type=str, when_used="json"),
]
"""A `timedelta` field read from and written as `1h30m`."""
