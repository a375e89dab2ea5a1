"""The SQLite store's files are the owner's alone: the database (and the journal SQLite
makes with its mode) 0600, in a 0700 directory, when llmgw creates them (the store holds
key hashes, usage and spend), whatever the umask; and no `-shm` file is mapped, whose
faults were a SIGBUS."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

from llmgw.store import Store


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_the_store_files_are_0600_in_a_0700_directory(tmp_path: Path) -> None:
    database = tmp_path / "state" / "llmgw.db"
    seen: dict[str, int] = {}

    async def scenario() -> None:
        store = await Store.open(str(database))
        try:
            # A write through each connection: in WAL mode SQLite would have made -wal and -shm.
            await store.counters.register("gw", "host", 1, 1_800_000_000.0)
            await store.keys.active(1_800_000_000.0)
            for suffix in ("", "-wal", "-shm"):
                if Path(f"{database}{suffix}").exists():
                    seen[suffix] = mode(Path(f"{database}{suffix}"))
        finally:
            await store.close()

    previous = os.umask(0o022)  # the usual umask, which leaves new files readable by all
    try:
        asyncio.run(scenario())
    finally:
        os.umask(previous)
    assert seen == {"": 0o600}
    assert mode(database.parent) == 0o700


def test_a_store_directory_that_exists_keeps_its_mode(tmp_path: Path) -> None:
    os.chmod(tmp_path, 0o755)
    database = tmp_path / "llmgw.db"

    async def scenario() -> None:
        store = await Store.open(str(database))
        await store.close()

    asyncio.run(scenario())
    assert mode(tmp_path) == 0o755
    assert mode(database) == 0o600
