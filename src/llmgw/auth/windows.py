"""Sliding-window arithmetic for rate limits: pure functions of counts and time.

A limit per minute is judged on two fixed one-minute windows: the count of the current
one plus the previous one's weighted by how much of it still overlaps the last sixty
seconds. Fixed windows alone would let twice the limit through across a boundary; a
log of every request would cost memory per request. The estimate assumes requests
were spread evenly over the previous window, which is the usual and adequate bet.
"""

from __future__ import annotations

import math

WINDOW_S = 60


def window_start(now: float, window_s: int = WINDOW_S) -> int:
    return int(now // window_s) * window_s


def estimate(previous: float, current: float, now: float, start: int, window_s: int = WINDOW_S) -> float:
    """The count over the last `window_s` seconds."""
    elapsed = min(max(now - start, 0.0), float(window_s))
    return previous * (1.0 - elapsed / window_s) + current


def retry_after(
    previous: float,
    current: float,
    limit: float,
    cost: float,
    now: float,
    start: int,
    window_s: int = WINDOW_S,
) -> float:
    """Seconds until `cost` more fits under `limit` if nothing else is admitted."""
    elapsed = min(max(now - start, 0.0), float(window_s))
    room = limit - cost
    if previous * (1.0 - elapsed / window_s) + current <= room:
        return 0.0
    if current <= room and previous > 0:
        # Within this window, once enough of the previous one has slid out.
        needed = window_s * (1.0 - (room - current) / previous)
        return max(needed - elapsed, 0.0)
    # The next window begins with this one's count as its weighted past.
    if room < 0:
        return (window_s - elapsed) + window_s
    fraction = 1.0 - room / current if current > 0 else 0.0
    return (window_s - elapsed) + window_s * fraction


def until_reset(previous: float, current: float, now: float, start: int, window_s: int = WINDOW_S) -> float:
    """Seconds until the count is back to nothing (OpenAI's x-ratelimit-reset-*)."""
    if current > 0:
        return start + 2 * window_s - now
    if previous > 0:
        return start + window_s - now
    return 0.0


def format_reset(seconds: float) -> str:
    """A duration as OpenAI writes it in x-ratelimit-reset-*: `20ms`, `1s`, `6m0s`."""
    if seconds < 1:
        return f"{max(math.ceil(seconds * 1000), 0)}ms"
    whole = math.ceil(seconds)
    minutes, rest = divmod(whole, 60)
    return f"{minutes}m{rest}s" if minutes else f"{rest}s"
