"""When a delivery that failed is tried again, and when it is given up.

Exponential backoff with jitter: the n-th retry waits `base_s * 2**(n-1)`, at most
`cap_s`, times a random factor in [0.5, 1) so receivers coming back after an outage are
not hit by every sender's retries at the same instant; nothing is tried once `give_up_s`
has passed since the first attempt. With the defaults (5 s doubling to 5 min, for an
hour) a receiver down for 5 minutes gets its events within 5 minutes of coming back
(`first_try_after`, shown in tests/unit/notify/test_schedule.py), and one down for over
an hour loses them, with the log saying so.

Pure: the random draw is passed in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class RetrySchedule:
    base_s: float = 5.0
    cap_s: float = 300.0
    give_up_s: float = 3600.0

    def delay(self, attempts: int, draw: float) -> float:
        """The wait after the `attempts`-th failed attempt (1 is the first); `draw` is
        uniform in [0, 1)."""
        ceiling = min(self.base_s * 2.0 ** max(attempts - 1, 0), self.cap_s)
        return ceiling * (0.5 + draw / 2)

    def next_at(self, first_at: float, attempts: int, now: float, draw: float) -> float | None:
        """When to try again after `attempts` failures, the first at `first_at`, the last
        ending at `now`; None once that would be past `give_up_s`."""
        at = now + self.delay(attempts, draw)
        return at if at - first_at <= self.give_up_s else None

    def attempts_until(self, first_at: float, until: float, draw: Callable[[], float]) -> list[float]:
        """The times of every attempt from `first_at` that fail until `until`, and the
        first after it (the one that succeeds); empty where the schedule gives up first."""
        times = [first_at]
        while times[-1] < until:
            after = self.next_at(first_at, len(times), times[-1], draw())
            if after is None:
                return []
            times.append(after)
        return times

    def first_try_after(self, down_s: float, draw: Callable[[], float]) -> float | None:
        """How long after a receiver comes back from `down_s` of outage its oldest
        event is tried (and delivered); None where the schedule gives up first."""
        times = self.attempts_until(0.0, down_s, draw)
        return times[-1] - down_s if times else None
