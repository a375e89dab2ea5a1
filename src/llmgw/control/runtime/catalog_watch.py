"""Picking up runtime catalog changes made through another server.

The server that takes a change applies it at once; every other server sharing the store
finds it by polling the table's version (row count and latest `updated_at`) every
`control.interval` and, when that moved, loading the merged catalog and handing it on.
Polling a two-number aggregate is cheap enough at that period that no notification
channel is needed, and it works the same on SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import timedelta

from llmgw.catalog import Catalog
from llmgw.control.runtime.background import Background
from llmgw.errors import ConfigError, StoreError
from llmgw.store.catalog_store import CatalogStore

log = logging.getLogger(__name__)

Version = tuple[int, float | None]


class CatalogWatcher(Background):
    """Calls `apply` with the merged catalog whenever the stored entries change."""

    task_name = "catalog-watch"

    def __init__(self, catalogs: CatalogStore, apply: Callable[[Catalog], None], interval: timedelta) -> None:
        self._catalogs = catalogs
        self._apply = apply
        self._interval = interval
        self._seen: Version | None = None

    async def check(self) -> bool:
        """One poll; returns whether a changed catalog was applied. A store that cannot be
        reached, or entries that no longer make a valid catalog, keep the catalog in force
        (logged): the next poll tries again."""
        try:
            version = await self._catalogs.version()
            if version == self._seen:
                return False
            runtime = await self._catalogs.load()
        except StoreError as exc:
            log.warning("catalog watch: the store cannot be read, keeping the catalog in force: %s", exc)
            return False
        except ConfigError as exc:
            log.error("catalog watch: the stored catalog is refused, keeping the one in force: %s", exc)
            self._seen = version
            return False
        self._seen = version
        self._apply(runtime.catalog)
        return True

    async def run(self) -> None:
        while True:
            await self.check()
            await asyncio.sleep(self._interval.total_seconds())
