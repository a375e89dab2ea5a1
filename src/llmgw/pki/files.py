"""Writing the cluster's key material: every file 0600 in a directory 0700, created with
that mode rather than narrowed afterwards, so no other user can read a key in between."""

from __future__ import annotations

import os
from pathlib import Path

FILE_MODE = 0o600
DIR_MODE = 0o700


def private_dir(path: Path) -> None:
    """`path` and its missing parents made 0700; an existing `path` narrowed to 0700."""
    path.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    os.chmod(path, DIR_MODE)


def write_private(path: Path, data: bytes) -> None:
    """Writes `data` to `path` with mode 0600 (an existing file is replaced and narrowed)."""
    private_dir(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.chmod(path, FILE_MODE)
