"""The records of one hand-over to `AuthGate.record_many`, grouped: requests alike (one
caller, model, status, streaming and five-minute bucket) are summed and charged once,
so accounting costs per group rather than per request.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from dataclasses import dataclass, field

from llmgw.auth.principal import Principal
from llmgw.store.rows import RecordValues

TS = operator.itemgetter(0)
PROMPT = operator.itemgetter(3)
COMPLETION = operator.itemgetter(4)
COST = operator.itemgetter(5)
"""Fields of `RecordValues`, for sums taken in C over a group's records."""


Tagged = tuple[Mapping[str, str], int, int]
"""An answered request's tags, prompt and completion tokens, for the tagged metrics."""


@dataclass(slots=True, eq=False)
class UsageGroup:
    """Requests alike in one hand-over to `record_many`: one caller, model, status,
    streaming and five-minute bucket, and their records."""

    principal: Principal
    model: str
    status: int
    stream: bool
    bucket: int
    prompt_price: int
    completion_price: int
    """The model's prices, in micro-units per thousand tokens."""
    values: list[RecordValues] = field(default_factory=list)
    counted: int = 0
    """The tokens `admit` counted against TPM, which the real counts replace."""
