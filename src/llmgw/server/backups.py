"""Backups in a running server: the metric of the newest archive in `backup_dir`, always
(so backups from cron show too), and with `backup_schedule` the daily backup, whose
failure is the `backup.failed` event."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from llmgw.backup import BackupCollector, Written, run_backup, run_daily, sources
from llmgw.config import Settings
from llmgw.config.backup import parse_time_of_day
from llmgw.core.events import EventSink
from llmgw.server.gateway import Gateway


def start_backups(
    settings: Settings, gateway: Gateway, config_dir: Path | None, events: EventSink
) -> asyncio.Task[None] | None:
    gateway.registry.register(BackupCollector(Path(settings.effective_backup_dir)))
    when = parse_time_of_day(settings.backup_schedule)
    if when is None:
        return None
    where = sources(settings, config_dir, os.environ.get("STATE_DIRECTORY"))

    async def backup(started: float) -> Written:
        return await run_backup(settings, where, started)

    return asyncio.create_task(run_daily(*when, backup, events), name="backup-schedule")
