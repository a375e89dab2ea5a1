"""The base of every settings and catalog type: frozen once built, and an unknown key
is an error rather than a silently ignored typo."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    """A frozen model that refuses keys it does not declare."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)
