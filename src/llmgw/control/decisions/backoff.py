"""Retry pacing for models whose replicas keep failing.

A replica that fails to load, or crashes, is not restarted by its agent (a crash loop
is something a person must see); the control plane places the model again, but only
after a wait that doubles with each failure in a row, from `control.base_backoff` to
`control.max_backoff`. A replica of the model becoming ready clears the count.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Backoff:
    """Per-model retry pacing for models whose replicas fail: the first failure waits
    `base_s`, each further one twice as long, up to `max_s`; a replica of the model
    becoming ready forgets the failures."""

    base_s: float
    max_s: float
    failures: dict[str, int] = field(default_factory=dict)
    until: dict[str, float] = field(default_factory=dict)

    def failed(self, model: str, now: float) -> float:
        """Counts a failure; returns the unix time retries may resume."""
        count = self.failures.get(model, 0) + 1
        self.failures[model] = count
        wait = min(self.base_s * (2 ** (count - 1)), self.max_s)
        self.until[model] = now + wait
        return self.until[model]

    def succeeded(self, model: str) -> None:
        self.failures.pop(model, None)
        self.until.pop(model, None)

    def holds_longest(self, model: str) -> bool:
        """Whether `model`'s failures in a row have brought its wait to `max_s`: it is
        parked, tried only once per longest wait, until a replica of it becomes ready."""
        count = self.failures.get(model, 0)
        return count > 0 and self.base_s * (2 ** (count - 1)) >= self.max_s

    def holds(self, model: str, now: float) -> bool:
        """Whether starting `model` must wait."""
        return now < self.until.get(model, 0.0)
