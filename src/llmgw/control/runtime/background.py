"""What the control plane's store watchers share: a loop on a task of its own, started
and stopped the same way, and one warning (not one per interval) while the store cannot
be reached."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from llmgw.errors import StoreError


class Background:
    """A `run` loop on its own task: `start` it once, `close` cancels and awaits it."""

    task_name = "background"
    _task: asyncio.Task[None] | None = None

    async def run(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self.run(), name=self.task_name)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None


class StoreOutage:
    """Says once that the store stopped answering, and once that it is back."""

    def __init__(self, log: logging.Logger, what: str, keeping: str) -> None:
        self._log = log
        self._what = what
        self._keeping = keeping
        self.failing = False

    def failed(self, exc: Exception) -> None:
        if not self.failing:
            self._log.warning("%s: the store cannot be reached, %s: %s", self._what, self._keeping, exc)
        self.failing = True

    def answered(self) -> None:
        if self.failing:
            self._log.info("%s: the store answers again", self._what)
        self.failing = False

    async def attempt(self, work: Callable[[], Awaitable[None]]) -> None:
        """Runs one interval's `work`; a `StoreError` is said (once) and left for the
        next interval to retry."""
        try:
            await work()
        except StoreError as exc:
            self.failed(exc)
            return
        self.answered()
