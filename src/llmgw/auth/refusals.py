"""Usage records for the requests the gateway refuses itself (400, 404, 413, 429, 503…
on the generation routes): made cheaply, bounded, and handed to the usage pipeline
with the answered requests' records, so every request with a caller leaves one.

A refusal is what a caller can force without limit (a 429 costs the gateway almost
nothing to answer, so a client looping on it makes thousands a second), so each
record is bounded twice before it costs the store anything: at most
`per_caller` records per caller and at most `total` in all per hand-over (a second);
the rest are counted (`unrecorded`, a metric) but not kept. They then travel like any
other record: batched, written by the usage writer in its transactions, never a store
write per request. Refusals without a caller (401: no key, or one that is not valid)
are counted only, never recorded: a junk key names nobody, and a row per junk request
is a store write an anonymous attacker could force.

A refused request's record has no tokens, no model (the model a refused request names
is the caller's text, not something that was served: it is kept out of the store) and
no replica.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from llmgw.auth.principal import Principal
from llmgw.auth.usage import AccountLike, Finished

PER_CALLER = 50
"""Refusal records kept per caller per hand-over."""
TOTAL = 1000
"""Refusal records kept in all per hand-over."""


@dataclass(slots=True)
class Refusal:
    """A refused request as a usage record (`UsageRecordLike`)."""

    request_id: str
    status: int
    started: float
    finished: float
    account: AccountLike
    model: str = ""
    endpoint: str = ""
    stream: bool = False
    first_byte: float | None = None


class RefusalLog:
    """The refusals since the last hand-over, bounded per caller and in all."""

    def __init__(self, *, per_caller: int = PER_CALLER, total: int = TOTAL) -> None:
        self._per_caller = per_caller
        self._total = total
        self._kept: list[Finished] = []
        self._by_caller: dict[str, int] = {}
        self.unrecorded = 0
        """Refusals counted but not recorded, over the bounds."""
        self.anonymous = 0
        """Refusals without a caller (401), counted only."""

    def add(
        self, principal: Principal | None, status: int, request_id: str, started: float, ended: float
    ) -> None:
        """Keeps a record of a refusal if the bounds allow; times are on the request
        path's monotonic clock, as answered requests' are."""
        if principal is None:
            self.anonymous += 1
            return
        key_id = principal.key_id
        seen = self._by_caller.get(key_id, 0)
        if seen >= self._per_caller or len(self._kept) >= self._total:
            self.unrecorded += 1
            return
        self._by_caller[key_id] = seen + 1
        account: AccountLike = (principal, 0, _NO_TAGS, 0.0, None)
        self._kept.append((Refusal(request_id, status, started, ended, account), None))

    def take(self) -> list[Finished]:
        """The records kept since the last call, which start the bounds afresh."""
        kept, self._kept = self._kept, []
        self._by_caller.clear()
        return kept


_NO_TAGS: Mapping[str, str] = MappingProxyType({})
"""Tags of a refusal: none (read-only)."""
