"""How fast one band's queue of one model drains, to refuse at arrival what would time out.

Under overload a request that joins a queue it cannot leave before `queue_ttl` holds a
client connection for the whole ttl only to be told 503 at the end. Estimating how long
the newcomer would wait lets admission refuse it at once instead, with Retry-After.

The estimate is the queue's recent release rate while it had waiters: releases and the
time the queue was non-empty, both decayed with the same time constant, so an idle spell
(nothing waiting, nothing released) neither lowers nor raises the rate, and a band that
higher bands starve (waiters, no releases) reads as draining at under one request per
the time it has been stuck. The newcomer waits about (waiters ahead + 1) / rate.

Pure arithmetic on a small record updated in place (no allocation per event); the clock
is the caller's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(slots=True)
class DrainMeter:
    """One queue's recent releases and busy time, decayed with `tau_s`."""

    tau_s: float
    released: float = 0.0
    busy_s: float = 0.0
    at: float | None = None
    """When the figures were last brought up to date (the caller's clock)."""

    def advance(self, now: float, waiting: bool) -> None:
        """Brings the figures to `now`; `waiting` says whether the queue had waiters
        since the last call (its time counts as busy)."""
        at = self.at
        self.at = now
        if at is None or now <= at:
            return
        elapsed = now - at
        keep = math.exp(-elapsed / self.tau_s)
        self.released *= keep
        # The busy time added is itself decayed over the span: the integral of the decay.
        self.busy_s = self.busy_s * keep + (self.tau_s * (1.0 - keep) if waiting else 0.0)

    def release(self) -> None:
        """One waiter left the queue to be served (call `advance` first)."""
        self.released += 1.0


def expected_wait_s(meter: DrainMeter, ahead: int) -> float | None:
    """Seconds a newcomer behind `ahead` waiters would wait, or None without evidence
    (the queue has not had waiters recently). With no release seen, the rate is taken as
    one per the busy time: an under-estimate of the wait, so a refusal is certain."""
    busy = meter.busy_s
    if busy <= 0.0:
        return None
    return (ahead + 1) * busy / max(meter.released, 1.0)


def would_outwait(meter: DrainMeter, ahead: int, ttl_s: float) -> float | None:
    """The expected wait when it is past `ttl_s` (refuse at arrival), else None (queue)."""
    wait = expected_wait_s(meter, ahead)
    return wait if wait is not None and wait > ttl_s else None
