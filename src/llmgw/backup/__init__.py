"""Backups of a server: the store (keys, tenancy, limits, usage and the runtime catalog),
the cluster CA's files and the configuration in one archive, encrypted with age, copied
away and pruned (`write`); checking one whole and putting it back (`restore`); the
server's daily schedule (`schedule`) and the metric of the last success (`metrics`).
"""

from llmgw.backup.metrics import METRIC, BackupCollector
from llmgw.backup.restore import Restored, restore
from llmgw.backup.schedule import FAILED_EVENT, next_run, run_daily
from llmgw.backup.write import Sources, Written, run_backup, sources

__all__ = [
    "FAILED_EVENT",
    "METRIC",
    "BackupCollector",
    "Restored",
    "Sources",
    "Written",
    "next_run",
    "restore",
    "run_backup",
    "run_daily",
    "sources",
]
