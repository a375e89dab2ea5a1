"""Deadlines for exchanges with replicas, kept by one periodic sweep.

A timer per wait (asyncio.timeout, call_at) costs several microseconds to arm and
disarm, and a streamed answer waits dozens of times. Here an exchange registers one
`Watch`, moves its deadline by assigning a float, and a sweep every `tick` seconds
expires whatever is past due by failing its connection with the phase's timeout error.
Deadlines are therefore honoured to within one tick (50 ms by default), which is fine
for bounds measured in seconds.

A watch may carry a `renew` check, asked when its deadline passes: it may move the
deadline on (the replica shows it is alive by other means) instead of expiring it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from llmgw.errors import PhaseTimeout
from llmgw.upstream.connection import Connection

log = logging.getLogger(__name__)


class Watch:
    """One exchange's deadline: when the loop's clock passes `deadline`, `conn` fails
    with `phase(seconds)`, unless `renew(watch, now)` moves the deadline and says so.
    `subject` and `until` are the renew check's own: what it asks about and its last
    possible deadline, kept here so that one check serves every watch."""

    __slots__ = ("conn", "deadline", "phase", "renew", "seconds", "subject", "until")

    def __init__(self, conn: Connection, deadline: float, phase: type[PhaseTimeout], seconds: float) -> None:
        self.conn = conn
        self.deadline = deadline
        self.phase = phase
        self.seconds = seconds
        self.renew: Callable[[Watch, float], bool] | None = None
        self.subject: object = None
        self.until = 0.0

    def move(self, deadline: float, phase: type[PhaseTimeout], seconds: float) -> None:
        """Sets the next deadline and what passing it means."""
        self.deadline = deadline
        self.phase = phase
        self.seconds = seconds


class Watchdog:
    """The set of armed watches and the sweep that expires them."""

    def __init__(self, tick: float = 0.05) -> None:
        self._tick = tick
        self._watches: set[Watch] = set()
        self.expired = 0

    def arm(self, conn: Connection, deadline: float, phase: type[PhaseTimeout], seconds: float) -> Watch:
        watch = Watch(conn, deadline, phase, seconds)
        self._watches.add(watch)
        return watch

    def disarm(self, watch: Watch) -> None:
        self._watches.discard(watch)

    def sweep(self, now: float) -> int:
        """Expires every watch past its deadline; returns how many."""
        due = [w for w in self._watches if w.deadline <= now]
        expired = 0
        for watch in due:
            renew = watch.renew
            if renew is not None and renew(watch, now):
                continue
            self._watches.discard(watch)
            watch.conn.expire(watch.phase(watch.seconds))
            expired += 1
        self.expired += expired
        return expired

    def __len__(self) -> int:
        return len(self._watches)

    async def run(self) -> None:
        """Sweeps every tick until cancelled."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self._tick)
            self.sweep(loop.time())
