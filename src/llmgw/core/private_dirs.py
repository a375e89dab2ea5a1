"""Folders only llmgw's own user may read: where keys, spilled usage, uploaded files and
backups are kept.

`Path.mkdir(parents=True, mode=0o700)` gives that mode to the last folder alone; the
folders it makes above it get the umask's (usually 0755), so a state directory made on
the way to `state/files` would be readable by everyone. `private_dir` makes each missing
folder 0700.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

PRIVATE_DIR_MODE = 0o700


def private_dir(path: Path) -> Path:
    """Makes `path` and every missing folder above it, each 0700; folders that exist
    already keep their mode. Returns `path`."""
    missing: list[Path] = []
    folder = path
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for folder in reversed(missing):
        # Another process may make it meanwhile; it is there either way.
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=PRIVATE_DIR_MODE)
    return path
