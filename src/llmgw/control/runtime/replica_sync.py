"""The loop between a server's control plane and the store's replica table.

Every `control.interval`, on each server sharing a store:

- the leader, once settled, writes the replica set it publishes when the set or its term
  changed, and rewrites it every `refresh` anyway (so a write that failed is retried
  and `updated_at` shows the leader alive), fenced by its lease;
- a follower reads the table and publishes what `servable` allows into its own router,
  beside its static endpoints.

A store that cannot be reached changes nothing: the router keeps the set in force
(routing never waits on the store), and the next interval tries again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import timedelta

from llmgw.control.runtime.background import Background, StoreOutage
from llmgw.control.runtime.plane import ControlPlane
from llmgw.control.tables.replica_table import ReplicaTable, servable
from llmgw.router.endpoints import EndpointSpec
from llmgw.store.lease import LeaderLease

log = logging.getLogger(__name__)


def follower_grace(unreachable_after: timedelta, lease_ttl: timedelta) -> timedelta:
    """How long after a new term began a follower still routes by the set an earlier
    term wrote: the new leader gives agents `unreachable_after` before it writes its
    own, and a lease ttl more covers a write that had to be retried."""
    return unreachable_after + lease_ttl


class ReplicaSync(Background):
    """Writes the leader's replica set to the store; publishes it on the followers."""

    task_name = "replica-sync"

    def __init__(
        self,
        plane: ControlPlane,
        table: ReplicaTable,
        lease: LeaderLease,
        *,
        interval: timedelta,
        grace: timedelta,
        refresh: timedelta,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._plane = plane
        self._table = table
        self._lease = lease
        self._interval = interval
        self._grace = grace
        self._refresh = refresh
        self._clock = clock
        self._written: tuple[int, tuple[EndpointSpec, ...]] | None = None
        self._written_at = 0.0
        self._outage = StoreOutage(log, "replica table", "keeping the set in force")

    async def step(self) -> None:
        """One interval's work, as leader or as follower."""
        await self._outage.attempt(self._sync)

    async def _sync(self) -> None:
        if self._plane.leading:
            await self._write()
        elif not self._lease.is_leader():
            await self._follow()

    async def _write(self) -> None:
        term = self._lease.term
        if term is None or not self._plane.settled():
            # Not settled: agents are still coming back, and an empty or partial set
            # written now would withdraw serving replicas from every follower.
            return
        specs = self._plane.publisher.replicas
        now = self._clock()
        if self._written == (term, specs) and now - self._written_at < self._refresh.total_seconds():
            return
        if await self._table.write(specs, holder=self._lease.holder, term=term):
            self._written = (term, specs)
            self._written_at = now
        else:
            log.info("replica table: not written, the lease is no longer this server's at term %d", term)

    async def _follow(self) -> None:
        self._written = None
        snapshot = await self._table.read()
        rows = servable(snapshot, self._grace)
        self._plane.publisher.follow(row.spec(self._plane.api_key(row.replica_id)) for row in rows)

    async def run(self) -> None:
        while True:
            await self.step()
            await asyncio.sleep(self._interval.total_seconds())
