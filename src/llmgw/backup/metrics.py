"""`llmgw_backup_last_success_timestamp_seconds`: when the newest archive in `backup_dir`
was begun, read from its name at each scrape. Read from the directory rather than kept
by the server, it counts backups run from cron through the command line as well as the
server's own; an archive only gets its name once it is whole, so a name is a success.
With no archive there is no sample (alert on `absent(...)` as well as on its age).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from llmgw.backup.names import newest_time

METRIC = "llmgw_backup_last_success_timestamp_seconds"


def last_success(backup_dir: Path) -> float | None:
    try:
        # One directory listing of a handful of names per scrape: microseconds.
        return newest_time(os.listdir(backup_dir))
    except OSError:
        return None


class BackupCollector(Collector):
    def __init__(self, backup_dir: Path) -> None:
        self._dir = backup_dir

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            METRIC,
            "When the newest backup archive in backup_dir was begun (UNIX seconds); "
            "absent when there is none.",
        )
        when = last_success(self._dir)
        if when is not None:
            family.add_metric([], when)
        yield family
