"""Files and batches in the store (llmgw.store.batch_files), on SQLite and PostgreSQL:
everything is found only by its owner, file lists page in order, expired files are
found by the sweep, and a batch's lease keeps it on one gateway until that one stops
renewing it."""

from __future__ import annotations

import asyncio
from pathlib import Path

from auth_store_helpers import opened, settings

from llmgw.auth.gate import AuthGate
from llmgw.batch import BatchService
from llmgw.store.batch_files import BatchRow, FileRow


def test_files_are_found_by_their_owner_only_and_page_in_order(store_location: str) -> None:
    async def scenario() -> None:
        async with opened(store_location) as store:
            repo = store.batch
            for i in range(5):
                await repo.add_file(FileRow(f"file-{i}", "project:a", "batch", f"f{i}", i, float(i)))
            await repo.add_file(FileRow("file-x", "project:b", "batch", "x", 1, 9.0, expires_at=20.0))
            assert await repo.file("project:b", "file-1") is None
            assert (await repo.file("project:a", "file-1")) is not None
            newest = await repo.files("project:a", limit=2, after=None, purpose=None, newest_first=True)
            assert [f.id for f in newest] == ["file-4", "file-3"]
            after = await repo.files("project:a", limit=10, after="file-3", purpose=None, newest_first=True)
            assert [f.id for f in after] == ["file-2", "file-1", "file-0"]
            oldest = await repo.files("project:a", limit=2, after="file-1", purpose=None, newest_first=False)
            assert [f.id for f in oldest] == ["file-2", "file-3"]
            assert not await repo.delete_file("project:a", "file-x")
            assert [f.id for f in await repo.expired_files(19.0, 10)] == []
            assert [f.id for f in await repo.expired_files(20.0, 10)] == ["file-x"]

    asyncio.run(scenario())


def test_a_batch_lease_holds_until_it_lapses_or_is_given_up(store_location: str) -> None:
    async def scenario() -> None:
        async with opened(store_location) as store:
            repo = store.batch
            await repo.add_batch(BatchRow("batch_1", "project:a", "h", "in_progress", "{}", 1.0, 1.0))
            assert await repo.claim("batch_1", "gw-a", 100.0, 30.0, force=False)
            assert not await repo.claim("batch_1", "gw-b", 110.0, 30.0, force=False)
            assert await repo.renew("batch_1", "gw-a", 150.0)
            assert not await repo.claim("batch_1", "gw-b", 140.0, 30.0, force=False)
            # gw-a stops renewing: past its lease, gw-b takes over and gw-a learns it.
            assert await repo.claim("batch_1", "gw-b", 151.0, 30.0, force=False)
            assert not await repo.renew("batch_1", "gw-a", 200.0)
            await repo.release("batch_1", "gw-b")
            assert await repo.claim("batch_1", "gw-c", 152.0, 30.0, force=False)
            # Alone on the store, a gateway takes its batches back at once after a crash.
            assert await repo.claim("batch_1", "gw-d", 153.0, 30.0, force=True)
            await repo.save_batch("batch_1", "completed", "{}", 160.0)
            assert not await repo.claim("batch_1", "gw-e", 999.0, 30.0, force=True)
            assert [b.id for b in await repo.batches_in(["in_progress"])] == []
            assert await repo.batch("project:b", "batch_1") is None

    asyncio.run(scenario())


def test_the_sweep_removes_result_files_past_their_retention(store_location: str, tmp_path: Path) -> None:
    async def scenario() -> None:
        async with opened(store_location) as store:
            now = [100.0]
            config = settings()
            service = BatchService(
                config, store.batch, AuthGate(config, store), tmp_path, clock=lambda: now[0]
            )
            await asyncio.to_thread(service.disk.prepare)
            for file_id, expires in (("file-old", 150.0), ("file-kept", None)):
                service.disk.path(file_id).write_bytes(b"x")
                await store.batch.add_file(
                    FileRow(file_id, "project:a", "batch_output", "f", 1, 1.0, expires)
                )
            assert await service.sweep_once() == 0
            now[0] = 150.0
            assert await service.sweep_once() == 1
            assert await store.batch.file("project:a", "file-old") is None
            assert not service.disk.path("file-old").exists()
            assert await store.batch.file("project:a", "file-kept") is not None
            assert service.disk.path("file-kept").exists()

    asyncio.run(scenario())
