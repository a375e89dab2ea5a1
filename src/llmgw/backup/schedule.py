"""The server's own daily backup at `backup_schedule` (HH:MM, UTC): when the next one is
due (pure, the clock given), and the loop that waits for it, runs it, and reports a
failure as the `backup.failed` event and a log line. A failed day is not retried before
the next: the event asks a person to look.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

from llmgw.core.events import EventSink
from llmgw.errors import LlmgwError

log = logging.getLogger(__name__)
FAILED_EVENT = "backup.failed"


def next_run(now: float, hour: int, minute: int) -> float:
    """The first HH:MM UTC strictly after `now` (UNIX seconds)."""
    today = datetime.fromtimestamp(now, UTC).replace(hour=hour, minute=minute, second=0, microsecond=0)
    due = today if today.timestamp() > now else today + timedelta(days=1)
    return due.timestamp()


async def run_daily(
    hour: int,
    minute: int,
    backup: Callable[[float], Awaitable[object]],
    events: EventSink,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> None:
    """Runs `backup(started)` every day at HH:MM UTC until cancelled."""
    while True:
        due = next_run(clock(), hour, minute)
        # The loop's timer runs on the monotonic clock and may wake a little before the
        # wall clock reaches `due`: sleep out the rest, so a backup never starts early
        # (and the next due time is not this one again).
        while (left := due - clock()) > 0:
            await sleep(left)
        started = clock()
        try:
            await backup(started)
        except Exception as exc:  # the daily loop outlives one bad day; logged and sent
            log.error("the scheduled backup failed: %s", exc, exc_info=not isinstance(exc, LlmgwError))
            day = datetime.fromtimestamp(started, UTC).strftime("%Y-%m-%d")
            events.emit(FAILED_EVENT, day, {"error": str(exc), "started": started})
        else:
            log.info("the scheduled backup is written")
