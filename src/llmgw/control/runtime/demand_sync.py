"""The loop between a server's control plane and the store's demand rows.

Every `control.interval`, on each server sharing a store:

- every server (leader or not) writes what its router saw of each model when that
  changed (`changed_reports`), and otherwise marks its rows alive every `refresh`; a
  request that starts waiting for a model writes at once (`urge`), not at the next
  interval;
- the leader reads every other server's rows and hands them to its plane, which merges
  them into the demand it plans with (`llmgw.control.decisions.demand.merge_demand`) and runs a
  pass at once when a request elsewhere newly waits; now and then it deletes the rows
  of servers long gone.

A store that cannot be reached changes nothing: what was last written stays, the
leader plans with the reports it last read (each ignored once its server has been
silent for `silent_after`), and the next interval tries again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from datetime import timedelta

from llmgw.control.decisions.demand import Asked, changed_reports, on_local_clock
from llmgw.control.runtime.background import Background, StoreOutage
from llmgw.control.runtime.plane import ControlPlane
from llmgw.control.tables.demand_table import DemandTable
from llmgw.store.lease import LeaderLease

log = logging.getLogger(__name__)

FORGET_AFTER = timedelta(hours=1)
"""Rows of a server silent this long are deleted: it ended (a restarted server reports
under a new holder name), and its reports have long been ignored."""
ASKED_RESOLUTION = timedelta(seconds=1)
"""A last-asked time that moved by less is not written again: a model asked for all the
time costs one write a second per server, and the leader may see an ask up to this
late, which an idle timeout (seconds to hours) does not notice."""


def silent_after(interval: timedelta, refresh: timedelta) -> timedelta:
    """How long a server's rows are believed without a word from it: it marks them alive
    every `refresh` (or writes sooner), so two missed marks and a pass's delay."""
    return 2 * refresh + interval


class DemandSync(Background):
    """Writes this server's demand to the store; on the leader, reads everyone's."""

    task_name = "demand-sync"

    def __init__(
        self,
        plane: ControlPlane,
        table: DemandTable,
        lease: LeaderLease,
        *,
        interval: timedelta,
        refresh: timedelta,
        forget_after: timedelta = FORGET_AFTER,
        resolution: timedelta = ASKED_RESOLUTION,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._plane = plane
        self._table = table
        self._lease = lease
        self._interval = interval
        self._refresh = refresh
        self._forget_after = forget_after
        self._resolution = resolution.total_seconds()
        self._clock = clock
        self.silent_after = silent_after(interval, refresh)
        self._written: dict[str, Asked] = {}
        self._marked_at: float | None = None
        self._forgot_at: float | None = None
        self._urgent = asyncio.Event()
        self._outage = StoreOutage(log, "demand table", "keeping what was read")

    def urge(self, _model: str = "") -> None:
        """A request started waiting here: write now rather than at the next interval."""
        self._urgent.set()

    async def step(self) -> None:
        """One interval's work: this server's report, then, leading, everyone's."""
        await self._outage.attempt(self._exchange)

    async def _exchange(self) -> None:
        await self._report()
        if self._plane.leading:
            await self._gather()
        else:
            self._plane.hear_others((), self.silent_after)

    async def _report(self) -> None:
        holder = self._lease.holder
        now = self._clock()
        asked = self._plane.asked_here()
        changed, gone = changed_reports(asked, self._written, self._resolution)
        if changed or gone:
            await self._table.write(holder, changed, gone, local_now=self._plane.now())
            self._written = {model: self._written.get(model, a) for model, a in asked.items()} | changed
            self._marked_at = now
        elif self._written and (
            self._marked_at is None or now - self._marked_at >= self._refresh.total_seconds()
        ):
            if await self._table.touch(holder) == 0:
                # Forgotten while this server could not reach the store: written anew next.
                self._written = {}
            self._marked_at = now

    async def _gather(self) -> None:
        now = self._clock()
        if self._forgot_at is None or now - self._forgot_at >= self._refresh.total_seconds():
            self._forgot_at = now
            forgotten = await self._table.forget(self._forget_after)
            if forgotten:
                log.info("demand table: forgot %d row(s) of servers long silent", forgotten)
        snapshot = await self._table.read()
        others = [row for row in snapshot.rows if row.holder != self._lease.holder]
        self._plane.hear_others(on_local_clock(others, snapshot.now, self._plane.now()), self.silent_after)

    async def run(self) -> None:
        while True:
            await self.step()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._urgent.wait(), self._interval.total_seconds())
            self._urgent.clear()
