"""Admission: priority bands, and the queue a request waits in when replicas are busy.

A band is a priority class. Under load, lower bands are held back first (each stops
being admitted past its saturation ceiling) so interactive traffic keeps flowing
while batch work waits.
"""

from __future__ import annotations

import difflib
from datetime import timedelta

from pydantic import Field, field_validator, model_validator

from llmgw.config.checks import Problem, refuse
from llmgw.config.values import HeaderName, NonNegativeInt, PositiveDuration
from llmgw.core.strict import Strict


class Band(Strict):
    """One priority class."""

    name: str
    """What clients and keys name the band by."""
    priority: int = 0
    """Higher is served first; no two bands share one."""
    saturation_ceiling: float
    """How busy the replicas may be, 0 to 1, before this band stops being admitted:
    1.0 admits until they are full, 0.3 only while they are mostly idle."""

    @field_validator("name")
    @classmethod
    def _named(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a band needs a name, like gold")
        return value

    @field_validator("saturation_ceiling")
    @classmethod
    def _share(cls, value: float) -> float:
        if not 0 < value <= 1:
            raise ValueError(f"{value} is a share of capacity: give a number above 0 and up to 1, like 0.85")
        return value


def _default_bands() -> tuple[Band, ...]:
    return (
        Band(name="platinum", priority=400, saturation_ceiling=1.00),
        Band(name="gold", priority=300, saturation_ceiling=0.85),
        Band(name="silver", priority=200, saturation_ceiling=0.60),
        Band(name="bronze", priority=100, saturation_ceiling=0.30),
    )


class Admission(Strict):
    """The flow-control layer in front of routing."""

    enabled: bool = True
    """Off, every request goes straight to routing."""
    bands: tuple[Band, ...] = Field(default_factory=_default_bands)
    """Priority classes: platinum 400 (ceiling 1.0), gold 300 (0.85), silver 200 (0.6), bronze 100 (0.3)."""
    default_band: str = "gold"
    """The band of a request that names none."""
    band_header: HeaderName = "x-llmgw-band"
    """The header a client names its band in. Believed as sent until keys carry a band,
    so the port must not reach callers who should not promote themselves."""
    queue_ttl: PositiveDuration = timedelta(seconds=30)
    """The longest a request waits to be admitted before it is refused with 503. One
    that its band's queue, at its recent drain rate, would not reach within it is
    refused on arrival instead (503 queue_full, with Retry-After)."""
    queue_capacity_per_band: NonNegativeInt = 2000
    """Requests each band may have waiting."""
    queue_capacity_total: NonNegativeInt = 0
    """Ceiling on queued requests over all bands. At the ceiling, room is made by
    rejecting (503, Retry-After) the most recent request of the lowest band that has
    one waiting, instead of the newcomer. 0 means half the sum of the per-band
    capacities."""
    interval: PositiveDuration = timedelta(milliseconds=10)
    """How often waiting requests are reconsidered."""

    @property
    def effective_queue_capacity_total(self) -> int:
        if self.queue_capacity_total:
            return self.queue_capacity_total
        return self.queue_capacity_per_band * len(self.bands) // 2

    @model_validator(mode="after")
    def _bands_agree(self) -> Admission:
        problems: list[Problem] = []
        names: dict[str, int] = {}
        priorities: dict[int, str] = {}
        for i, band in enumerate(self.bands):
            if band.name in names:
                problems.append(
                    Problem(
                        ("bands", i, "name"),
                        f"band {band.name!r} is declared twice: give each band its own name",
                    )
                )
            names.setdefault(band.name, i)
            if band.priority in priorities:
                problems.append(
                    Problem(
                        ("bands", i, "priority"),
                        f"{band.priority} is already band {priorities[band.priority]!r}'s: "
                        "give each band its own priority",
                    )
                )
            priorities.setdefault(band.priority, band.name)
        if self.enabled and not self.bands:
            problems.append(Problem(("bands",), "admission is enabled with no bands: give at least one band"))
        if self.bands and self.default_band not in names:
            guess = difflib.get_close_matches(self.default_band, list(names), n=1)
            hint = f"did you mean {guess[0]!r}?" if guess else f"use one of {', '.join(names)}"
            problems.append(Problem(("default_band",), f"{self.default_band!r} is not a band: {hint}"))
        refuse("Admission", problems)
        return self
