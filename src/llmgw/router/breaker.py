"""A circuit breaker for one endpoint: stop sending to a replica that keeps failing,
then let a single request find out whether it has recovered.

Closed, the endpoint takes traffic and consecutive failures are counted (a success
resets the count). At `failure_threshold` of them the breaker opens for `cooldown`
seconds. After the cooldown it is half-open: exactly one request, the probe, may go;
its success closes the breaker, its failure opens it for another cooldown. With
`failure_threshold` 1 a single failure is enough: a plain cooldown.

Reports that arrive while the breaker is open and no probe is out come from requests
sent before it opened; they say nothing new, so they neither close it nor extend the
cooldown. A probe whose caller gave up must not hold the only slot forever: `abandoned`
releases it, and a probe out for longer than the cooldown no longer holds it anyway.

Every time is `now`, monotonic seconds, passed in; the breaker never reads a clock.
"""

from __future__ import annotations

from typing import Literal

BreakerState = Literal["closed", "open", "half_open"]


class Breaker:
    """The failure state of one endpoint."""

    __slots__ = ("_cooldown", "_failures", "_opened_at", "_probe_since", "_threshold")

    def __init__(self, failure_threshold: int, cooldown: float) -> None:
        if failure_threshold < 1:
            raise ValueError(f"Breaker failure_threshold must be at least 1, got {failure_threshold}")
        if not cooldown >= 0:
            raise ValueError(f"Breaker cooldown must be zero or more seconds, got {cooldown}")
        self._threshold = failure_threshold
        self._cooldown = cooldown
        self._failures = 0
        self._opened_at: float | None = None  # None while closed
        self._probe_since: float | None = None  # when the half-open probe was sent

    @property
    def consecutive_failures(self) -> int:
        """Failures since the last success (or since the breaker was made)."""
        return self._failures

    def state(self, now: float) -> BreakerState:
        """Closed, open (cooling down), or half-open (a probe may go, or is out)."""
        opened_at = self._opened_at
        if opened_at is None:
            return "closed"
        return "open" if now < opened_at + self._cooldown else "half_open"

    def available(self, now: float) -> bool:
        """Whether a request may be sent now: closed, or half-open with the probe slot free."""
        opened_at = self._opened_at
        if opened_at is None:
            return True
        if now < opened_at + self._cooldown:
            return False
        probe = self._probe_since
        return probe is None or now >= probe + self._cooldown

    def begin(self, now: float) -> None:
        """A request is being sent. Half-open, it becomes the probe and takes the slot;
        call it only after `available` said yes."""
        opened_at = self._opened_at
        if opened_at is not None and now >= opened_at + self._cooldown:
            self._probe_since = now

    def succeeded(self) -> None:
        """A request finished well. While a probe is out this closes the breaker (reports
        carry no id, so any success then counts as the probe's); with none out, a late
        success from before the breaker opened leaves it open."""
        if self._opened_at is None:
            self._failures = 0
        elif self._probe_since is not None:
            self._close()

    def failed(self, now: float) -> None:
        """A request failed: counts towards opening, or reopens if it was the probe."""
        self._failures += 1
        if self._opened_at is None:
            if self._failures >= self._threshold:
                self._opened_at = now
        elif self._probe_since is not None:
            self._opened_at = now
            self._probe_since = None

    def trip(self, now: float) -> None:
        """Opens at once, whatever the count: for a failure that will repeat on every
        request, such as a provider refusing or rate-limiting the key it was sent."""
        self._failures = max(self._failures + 1, self._threshold)
        self._opened_at = now
        self._probe_since = None

    def abandoned(self, now: float) -> None:
        """A request ended without a verdict (the caller cancelled it). If it was the
        probe, the slot is free again at once. `now` is taken, like every other report,
        so callers need not know which reports consult the clock; this one does not."""
        del now
        self._probe_since = None

    def _close(self) -> None:
        self._failures = 0
        self._opened_at = None
        self._probe_since = None
