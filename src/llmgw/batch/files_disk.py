"""Where the Files API keeps bytes: one file per id under `<state>/files`, written
first under `<state>/files/tmp` and renamed into place once whole, so a file that is
visible is complete. Work of batches in progress lives under `<state>/batches/<id>`.

Every call here blocks (the disk); the async callers run them in a thread.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Generator
from pathlib import Path

from llmgw.core.private_dirs import private_dir

READ_CHUNK_BYTES = 256 * 1024
_SAFE_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")


class FileDisk:
    """The files' directory."""

    def __init__(self, state_dir: Path) -> None:
        self.files = state_dir / "files"
        self.tmp = self.files / "tmp"
        self.batches = state_dir / "batches"

    def prepare(self) -> None:
        """Makes the directories (private to the gateway's user) and drops temporary
        files an earlier process left half written."""
        for folder in (self.files, self.tmp, self.batches):
            private_dir(folder)
        for leftover in self.tmp.iterdir():
            with contextlib.suppress(OSError):
                leftover.unlink()

    def path(self, file_id: str) -> Path:
        if not _SAFE_ID.fullmatch(file_id):
            raise ValueError(f"file id {file_id!r} is not one this gateway made")
        return self.files / file_id

    def work(self, batch_id: str) -> Path:
        if not _SAFE_ID.fullmatch(batch_id):
            raise ValueError(f"batch id {batch_id!r} is not one this gateway made")
        return self.batches / batch_id

    def temp(self, name: str) -> Path:
        return self.tmp / name

    def place(self, source: Path, file_id: str) -> None:
        """Moves a whole file into place as `file_id`, durably."""
        os.replace(source, self.path(file_id))
        _sync_dir(self.files)

    def remove(self, file_id: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path(file_id).unlink()

    def remove_work(self, batch_id: str) -> None:
        shutil.rmtree(self.work(batch_id), ignore_errors=True)

    def chunks(self, file_id: str) -> Generator[bytes]:
        with self.path(file_id).open("rb") as handle:
            while chunk := handle.read(READ_CHUNK_BYTES):
                yield chunk


def _sync_dir(folder: Path) -> None:
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
