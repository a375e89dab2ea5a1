"""How good a sim replica is: its error rate and how much slower its first token is.

A canary is judged against the model it would replace by these two figures, so a test
needs a replica that fails a set share of its requests, or answers a set factor slower,
and may change either while it runs (`POST /sim/quality`). The errors are spread
evenly, never drawn at random: with `error_rate` 0.2, exactly one request in five (the
5th, 10th, 15th…) is answered 500, so a test knows what it will see.

The TTFT factor holds a request back before it enters the engine by (factor − 1) times
its prefill plus one decode step (what its first token takes on a replica with other
work in its batch): the time to its first token is then at least `factor` times that,
and the rest of its answer is unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Quality:
    """A replica's error rate (0 to 1) and TTFT factor (1 is as fast as it would be)."""

    error_rate: float = 0.0
    ttft_factor: float = 1.0

    def describe(self) -> dict[str, float]:
        """The setting as the admin API shows it."""
        return {"error_rate": self.error_rate, "ttft_factor": self.ttft_factor}


def check_quality(error_rate: object, ttft_factor: object) -> Quality:
    """A `Quality` from untrusted values; ValueError naming the field and its range."""
    rate, factor = _number("error_rate", error_rate), _number("ttft_factor", ttft_factor)
    if not 0 <= rate <= 1:
        raise ValueError("error_rate: must be between 0 and 1 (0.2 fails one request in five)")
    if not 1 <= factor <= 1000:
        raise ValueError("ttft_factor: must be between 1 and 1000 (3 makes the first token 3 times as late)")
    return Quality(rate, factor)


def _number(key: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise ValueError(f"{key}: must be a number")
    return float(value)


def fails(error_rate: float, number: int) -> bool:
    """Whether the `number`th request (from 1) since the rate was set fails: the one at
    which the count of failures owed, `number × error_rate`, reaches a new whole number."""
    return math.floor(number * error_rate + 1e-9) > math.floor((number - 1) * error_rate + 1e-9)


class QualityState:
    """The quality in force and the count of generation requests since it was set."""

    def __init__(self, quality: Quality) -> None:
        self.quality = quality
        self.seen = 0

    def set(self, quality: Quality) -> None:
        """Switch to `quality`; its error spread counts from here."""
        self.quality = quality
        self.seen = 0

    def on_request(self) -> bool:
        """Count one generation request; True when it is to be answered 500."""
        self.seen += 1
        return self.quality.error_rate > 0 and fails(self.quality.error_rate, self.seen)

    def extra_wait_s(self, first_token_s: float) -> float:
        """How long to hold a request whose first token would take `first_token_s` alone."""
        return (self.quality.ttft_factor - 1.0) * first_token_s
