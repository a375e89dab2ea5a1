"""Reading owners' GPU quotas from the store for the control plane's plan.

At start and every `control.interval` the quotas are read: one query over the few
scopes that have one. Only where some quota is set are the owners' ancestors looked up
(the team of each project and the org of each team that owns or holds a catalog model,
two more queries), since a model counts against every quota above its owner. The result
is handed to the plane, which plans with it from its next pass; a change wakes it.

A store that cannot be read keeps the quotas in force (logged): a brief outage should
neither lift every cap nor stop anything. A server without a store has no quotas.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Protocol

from llmgw.control.decisions.quotas import NO_QUOTAS, Quotas
from llmgw.control.runtime.background import Background
from llmgw.errors import StoreError
from llmgw.store.rows import ScopeKind

log = logging.getLogger(__name__)


class QuotaSource(Protocol):
    """What the watch reads: the store's tenancy (`TenancyRepo`)."""

    async def gpu_quotas(self) -> dict[str, int]: ...

    async def parents_of(self, kind: ScopeKind, ids: Iterable[str]) -> dict[str, str]: ...


def _ids(owners: Iterable[str], kind: str) -> set[str]:
    prefix = f"{kind}:"
    return {o[len(prefix) :] for o in owners if o.startswith(prefix)}


async def read_quotas(source: QuotaSource, owners: Iterable[str]) -> Quotas:
    """The quotas in force and the tree above `owners` (the catalog's models' owners)."""
    limits = await source.gpu_quotas()
    if not limits:
        return NO_QUOTAS
    named = set(owners)
    parents: dict[str, str] = {}
    for project, team in (await source.parents_of("project", _ids(named, "project"))).items():
        parents[f"project:{project}"] = f"team:{team}"
    teams = _ids(named, "team") | _ids(parents.values(), "team")
    for team, org in (await source.parents_of("team", teams)).items():
        parents[f"team:{team}"] = f"org:{org}"
    return Quotas(limits, parents)


class QuotaWatch(Background):
    """Reads the quotas every `interval` and hands each change to `apply`."""

    task_name = "quota-watch"

    def __init__(
        self,
        source: QuotaSource,
        owners: Callable[[], Iterable[str]],
        apply: Callable[[Quotas], None],
        interval: timedelta,
    ) -> None:
        self._source = source
        self._owners = owners
        self._apply = apply
        self._interval = interval
        self.quotas: Quotas = NO_QUOTAS

    async def check(self) -> bool:
        """One read; returns whether the quotas changed (and were applied)."""
        try:
            found = await read_quotas(self._source, self._owners())
        except StoreError as exc:
            log.warning("quota watch: the store cannot be read, keeping the quotas in force: %s", exc)
            return False
        if found == self.quotas:
            return False
        self.quotas = found
        self._apply(found)
        log.info("owners' GPU quotas now: %s", dict(found.limits) or "none")
        return True

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self._interval.total_seconds())
            await self.check()
