"""Writing the cluster's key material: every file 0600 in a directory 0700, created with
that mode rather than narrowed afterwards, so no other user can read a key in between."""

from __future__ import annotations

import os
from pathlib import Path

from llmgw.core.private_dirs import PRIVATE_DIR_MODE, private_dir

FILE_MODE = 0o600


def write_private(path: Path, data: bytes) -> None:
    """Writes `data` to `path` with mode 0600 (an existing file is replaced and narrowed),
    in a folder made or narrowed to 0700."""
    os.chmod(private_dir(path.parent), PRIVATE_DIR_MODE)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.chmod(path, FILE_MODE)
