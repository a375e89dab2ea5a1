"""The leader lease: which of the control planes sharing a store places work.

One row per lease name holds (holder, term, acquired_at, expires_at). Claiming and
renewing are the same single upsert, so there is no window between reading the row and
writing it in which two processes could both decide they won:

    INSERT ... VALUES (me, term 1, now, now + ttl)
    ON CONFLICT (name) DO UPDATE SET holder = me, expires_at = now + ttl,
        term = term + 1 unless the holder was already me
    WHERE the lease has expired OR the holder is me
    RETURNING the row

A row comes back only to the process that holds the lease after the statement. `now`
is the database's clock by default (PostgreSQL's `clock_timestamp()`, SQLite's
`julianday('now')`), so machines whose clocks disagree still agree on when a lease
lapses; tests inject a clock instead.

Each process keeps its own belief in a local deadline: the moment it *sent* the winning
claim plus the ttl, on its monotonic clock. The database's expiry is later than that (it
was computed when the statement ran), so a process stops believing it leads before any
other process can possibly win the row. `is_leader()` checks that deadline every time it
is asked, and a failed or lost renewal drops the belief at once: a leader never acts on
a stale belief, even while its renewal is stuck in a slow query.

The term is a fencing token: it grows by one at every change of holder and never goes
back. The reconciler stamps each start and stop order with the term it held when it
decided, and an agent refuses an order whose term is lower than one it has already
obeyed. A deposed leader that wakes up late (a long GC pause, a partition) therefore
cannot start a second replica for a slot its successor has already filled: its orders
carry the old term and are refused (docs/control-plane-ha.md).
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from llmgw.errors import StoreError
from llmgw.store import schema
from llmgw.store.engine import transaction, upsert

log = logging.getLogger(__name__)

LEASE_NAME = "control"
"""The one lease the control planes of a store contend for."""

_LEASES = schema.control_lease
# SQLite's julianday() counts days from noon, 4714 BC; this is the UNIX epoch in it.
_UNIX_EPOCH_JULIAN_DAY = 2440587.5
_SECONDS_A_DAY = 86400.0


@dataclass(frozen=True)
class LeaseRecord:
    """The lease row as the store holds it; times are the database's UNIX seconds."""

    holder: str
    term: int
    acquired_at: float
    expires_at: float


@dataclass(frozen=True)
class LeaseStatus:
    """The row (None when no process ever claimed it) and the database's time now."""

    record: LeaseRecord | None
    now: float

    @property
    def held(self) -> bool:
        return self.record is not None and self.record.expires_at > self.now


def new_holder_id(
    hostname: Callable[[], str] = socket.gethostname, pid: Callable[[], int] = os.getpid
) -> str:
    """A name for this process as a lease holder: host and pid for the operator, and a
    random part so a restarted process with a reused pid is a new holder (new term)."""
    return f"{hostname()}:{pid()}:{secrets.token_hex(3)}"


def renew_interval(ttl: timedelta) -> timedelta:
    """How often the holder renews and a standby tries: a third of the ttl, so two
    renewals may fail in a row before the lease lapses."""
    return ttl / 3


def still_leading(deadline: float | None, now: float) -> bool:
    """Whether a belief in leadership with this local deadline may be acted on now."""
    return deadline is not None and now < deadline


def database_now(
    conn: AsyncConnection, db_time: Callable[[], float] | None = None
) -> sa.ColumnElement[float]:
    """The database's clock as UNIX seconds, in `conn`'s dialect; `db_time` instead, for
    tests. Every server sharing the store reads the same clock through it."""
    if db_time is not None:
        return sa.literal(db_time(), schema.Seconds)
    if conn.dialect.name == "postgresql":
        return sa.cast(sa.extract("epoch", sa.func.clock_timestamp()), schema.Seconds)
    return sa.cast((sa.func.julianday("now") - _UNIX_EPOCH_JULIAN_DAY) * _SECONDS_A_DAY, schema.Seconds)


def lease_record(row: sa.Row[Any] | None) -> LeaseRecord | None:
    """A lease row as a record; None for no row."""
    if row is None:
        return None
    return LeaseRecord(str(row.holder), int(row.term), float(row.acquired_at), float(row.expires_at))


class LeaseTable:
    """The lease rows in the store: one atomic claim, a read, a release.

    `db_time` replaces the database's clock (tests); None uses the database's own."""

    def __init__(self, engine: AsyncEngine, db_time: Callable[[], float] | None = None) -> None:
        self._engine = engine
        self._db_time = db_time

    def _now(self, conn: AsyncConnection) -> sa.ColumnElement[float]:
        return database_now(conn, self._db_time)

    async def claim(self, name: str, holder: str, ttl: timedelta) -> LeaseRecord | None:
        """Takes or renews the lease for `holder` in one statement: the row when
        `holder` holds it afterwards, None when another process does."""
        async with transaction(self._engine) as conn:
            now = self._now(conn)
            insert = upsert(conn, _LEASES).values(
                name=name,
                holder=holder,
                term=1,
                acquired_at=now,
                expires_at=now + ttl.total_seconds(),
            )
            same_holder = _LEASES.c.holder == insert.excluded.holder
            statement = insert.on_conflict_do_update(
                index_elements=["name"],
                set_={
                    "holder": insert.excluded.holder,
                    "term": sa.case((same_holder, _LEASES.c.term), else_=_LEASES.c.term + 1),
                    "acquired_at": sa.case(
                        (same_holder, _LEASES.c.acquired_at), else_=insert.excluded.acquired_at
                    ),
                    "expires_at": insert.excluded.expires_at,
                },
                # excluded.acquired_at is this statement's `now`, evaluated once.
                where=sa.or_(same_holder, _LEASES.c.expires_at <= insert.excluded.acquired_at),
            ).returning(_LEASES.c.holder, _LEASES.c.term, _LEASES.c.acquired_at, _LEASES.c.expires_at)
            row = (await conn.execute(statement)).first()
        if row is None:
            return None
        return LeaseRecord(str(row.holder), int(row.term), float(row.acquired_at), float(row.expires_at))

    async def read(self, name: str) -> LeaseStatus:
        async with transaction(self._engine) as conn:
            now = float((await conn.execute(sa.select(self._now(conn)))).scalar_one())
            row = (await conn.execute(_LEASES.select().where(_LEASES.c.name == name))).first()
        return LeaseStatus(lease_record(row), now)

    async def release(self, name: str, holder: str) -> None:
        """Ends `holder`'s lease now, so a standby need not wait out the ttl; does nothing
        when another process holds it."""
        async with transaction(self._engine) as conn:
            await conn.execute(
                _LEASES.update()
                .where(_LEASES.c.name == name, _LEASES.c.holder == holder)
                .values(expires_at=self._now(conn))
            )


class LeaderLease:
    """This process's side of the lease: claims it every ttl/3, believes it holds it
    until its local deadline, and says so through `is_leader()` and `term`.

    `clock` is monotonic seconds (injected by tests); `on_change` hears every change of
    belief, with the term gained or None when lost."""

    def __init__(
        self,
        table: LeaseTable,
        ttl: timedelta,
        *,
        holder: str | None = None,
        name: str = LEASE_NAME,
        clock: Callable[[], float] = time.monotonic,
        on_change: Callable[[int | None], None] | None = None,
    ) -> None:
        if ttl <= timedelta(0):
            raise ValueError(f"a lease ttl of {ttl} cannot be held: give a positive duration")
        self.table = table
        self.ttl = ttl
        self.holder = holder or new_holder_id()
        self.name = name
        self._clock = clock
        self._on_change = on_change
        self._deadline: float | None = None
        self._term: int | None = None
        self._task: asyncio.Task[None] | None = None

    def listen(self, on_change: Callable[[int | None], None]) -> None:
        """Sets who hears each change of belief: the control plane, built after the lease
        has made its first claim."""
        self._on_change = on_change

    def is_leader(self) -> bool:
        """Whether this process may act as the leader at this instant."""
        return still_leading(self._deadline, self._clock())

    @property
    def term(self) -> int | None:
        """The fencing term while leading, else None."""
        return self._term if self.is_leader() else None

    async def attempt(self) -> bool:
        """One claim or renewal; returns whether this process leads afterwards."""
        sent = self._clock()
        try:
            record = await asyncio.wait_for(
                self.table.claim(self.name, self.holder, self.ttl), self.ttl.total_seconds()
            )
        except (StoreError, TimeoutError) as exc:
            # A renewal that failed may or may not have reached the database; either way
            # this process cannot know it still leads, so it stops believing it does.
            if self._deadline is not None:
                log.warning("leader lease: renewal failed, stepping down: %r", exc)
            self._step_down()
            return False
        if record is None or record.holder != self.holder:
            self._step_down()
            return False
        gained = self._deadline is None or self._term != record.term or not self.is_leader()
        self._deadline = sent + self.ttl.total_seconds()
        self._term = record.term
        if gained:
            log.info("leader lease: %s leads, term %d", self.holder, record.term)
            self._notify(record.term)
        return True

    def _step_down(self) -> None:
        was = self._deadline is not None
        self._deadline = None
        self._term = None
        if was:
            self._notify(None)

    def _notify(self, term: int | None) -> None:
        if self._on_change is not None:
            self._on_change(term)

    async def run(self) -> None:
        """Claims or renews every ttl/3 until cancelled."""
        interval = renew_interval(self.ttl).total_seconds()
        while True:
            await self.attempt()
            await asyncio.sleep(interval)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self.run(), name=f"leader-lease-{self.name}")

    async def close(self, *, release: bool = True) -> None:
        """Stops claiming; by default hands the lease back so a standby takes over at its
        next try instead of after the ttl."""
        bound = self.ttl.total_seconds()
        if self._task is not None:
            task, self._task = self._task, None
            task.cancel()
            # A claim cancelled in flight ends once the driver has let go of its
            # connection; a store that stops answering must not hold a shutdown longer
            # than a ttl. (`wait`, not awaiting the task under a suppressed
            # CancelledError, which would also swallow a cancellation of this caller.)
            done, _ = await asyncio.wait({task}, timeout=bound)
            if not done:
                log.warning("leader lease: a claim did not end within %.1fs of being stopped", bound)
            elif not task.cancelled() and task.exception() is not None:
                log.error("leader lease: its loop had failed: %r", task.exception())
        leading = self._deadline is not None
        self._step_down()
        if release and leading:
            try:
                await asyncio.wait_for(self.table.release(self.name, self.holder), bound)
            except (StoreError, TimeoutError) as exc:
                log.warning("leader lease: could not hand the lease back (it lapses by itself): %r", exc)
