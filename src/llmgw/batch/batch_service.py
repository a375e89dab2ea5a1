"""The Files and Batch APIs of one gateway, built at start: the two applications on the
client port, the batches running here, their resumption after a restart, and the sweep
that removes result files past `router.batch.retain_days`.

Batch lines go through the gateway's own request path (`GatewayApp.serve_as`), which
exists only once the gateway is built, after its mounts: the server hands it over with
`attach` before `start`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from pathlib import Path

from llmgw.auth.gate import AuthGate
from llmgw.auth.principal import Principal
from llmgw.batch import batch_objects as objects
from llmgw.batch.batch_app import PREFIX as BATCHES_PREFIX
from llmgw.batch.batch_app import BatchesApp
from llmgw.batch.batch_runner import BatchRun, RunRules, ServeAs
from llmgw.batch.files_app import PREFIX as FILES_PREFIX
from llmgw.batch.files_app import FilesApp
from llmgw.batch.files_disk import FileDisk
from llmgw.config import Settings
from llmgw.errors import StoreError
from llmgw.http.rsgi import App
from llmgw.store.batch_files import BatchFilesRepo

log = logging.getLogger(__name__)

_SWEEP_S = 3600.0
LEASE_S = 30.0
"""How long a batch stays with a gateway that stopped renewing its lease (each second)."""
_SWEEP_BATCH = 500
_DAY_S = 86400.0


def lowest_band(settings: Settings) -> str | None:
    """The admission band of the lowest priority, where batch lines wait."""
    bands = settings.router.admission.bands
    return min(bands, key=lambda b: b.priority).name if bands else None


class BatchService:
    """Files and batches on this gateway."""

    def __init__(
        self,
        settings: Settings,
        repo: BatchFilesRepo,
        gate: AuthGate,
        state_dir: Path,
        *,
        shared: bool = False,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`shared`: other gateways use the store too (PostgreSQL), so a batch runs under
        a lease and one whose gateway stopped renewing is taken over."""
        limits = settings.router.batch
        self._repo = repo
        self._gate = gate
        self._clock = clock
        self.disk = FileDisk(state_dir)
        self._shared = shared
        self._rules = RunRules(
            concurrency=limits.effective_concurrency,
            band=lowest_band(settings),
            retain_s=limits.effective_retain_days * _DAY_S,
            runner=objects.new_id("gw-"),
            lease_s=LEASE_S,
            shared=shared,
        )
        self._serve_as: ServeAs | None = None
        self._runs: dict[str, tuple[BatchRun, asyncio.Task[None]]] = {}
        self.files = FilesApp(repo, self.disk, gate, limits.effective_max_file_bytes, clock)
        self.batches = BatchesApp(
            repo, self.disk.path, gate, limits.effective_max_lines, self.launch, self.cancel, clock
        )

    def mounts(self) -> list[tuple[str, App]]:
        return [(FILES_PREFIX, self.files), (BATCHES_PREFIX, self.batches)]

    def attach(self, serve_as: ServeAs) -> None:
        self._serve_as = serve_as

    async def start(self) -> list[asyncio.Task[None]]:
        """Prepares the directories, takes up the batches a stopped gateway left
        unfinished, and starts the sweep."""
        await asyncio.to_thread(self.disk.prepare)
        await self._take_up()
        tasks = [asyncio.create_task(self._sweep(), name="batch-sweep")]
        if self._shared:
            tasks.append(asyncio.create_task(self._watch_leases(), name="batch-leases"))
        return tasks

    async def _take_up(self) -> None:
        """Starts every unfinished batch not running here; one another gateway holds a
        live lease on stops again at once (`BatchRun.run` claims first)."""
        for row in await self._repo.batches_in(objects.UNFINISHED):
            if row.id not in self._runs:
                log.info("batch %s taken up (%s)", row.id, row.status)
                self.launch(row.id)

    async def _watch_leases(self) -> None:
        while True:
            await asyncio.sleep(LEASE_S / 2)
            try:
                await self._take_up()
            except StoreError:
                log.warning("batch leases could not be read from the store; tried again shortly")

    def launch(self, batch_id: str) -> None:
        serve_as = self._serve_as
        if serve_as is None or batch_id in self._runs:
            return
        run = BatchRun(
            batch_id, self._repo, self.disk, serve_as, self._principal_of, self._rules, self._clock
        )
        task = asyncio.create_task(self._guarded(run), name=f"batch-{batch_id}")
        self._runs[batch_id] = (run, task)

    def cancel(self, batch_id: str) -> None:
        running = self._runs.get(batch_id)
        if running is not None:
            running[0].cancel()
        else:
            self.launch(batch_id)  # not running here: finish it as cancelled

    async def close(self) -> None:
        """Stops the batches running here; each resumes where it stopped at the next start."""
        tasks = [task for _, task in self._runs.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._runs.clear()

    def _principal_of(self, key_hash: str) -> Principal | None:
        return self._gate.directory.principal(key_hash, self._clock())

    async def _guarded(self, run: BatchRun) -> None:
        try:
            await run.run()
        except asyncio.CancelledError:
            raise
        except (StoreError, OSError):
            # Left as it is in the store: the next start takes it up again.
            log.exception("batch %s stopped on a fault; it resumes at the next start", run.batch_id)
        finally:
            self._runs.pop(run.batch_id, None)

    async def sweep_once(self) -> int:
        """Removes the files past their retention (batch results after `retain_days`),
        their rows first so none is listed without its bytes; returns how many."""
        removed = 0
        for row in await self._repo.expired_files(self._clock(), _SWEEP_BATCH):
            await self._repo.delete_file(row.owner, row.id)
            await asyncio.to_thread(self.disk.remove, row.id)
            removed += 1
        return removed

    async def _sweep(self) -> None:
        while True:
            try:
                await self.sweep_once()
            except StoreError:
                log.warning("the file sweep could not reach the store; it tries again later")
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.sleep(_SWEEP_S)
