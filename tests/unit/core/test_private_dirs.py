"""Every folder `private_dir` makes is 0700, not only the last one; folders that exist
keep their mode."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from llmgw.core.private_dirs import private_dir


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_every_folder_it_makes_is_private(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        made = private_dir(tmp_path / "state" / "files" / "tmp")
    finally:
        os.umask(old)
    assert made.is_dir()
    for folder in (tmp_path / "state", tmp_path / "state" / "files", made):
        assert _mode(folder) == 0o700, folder


def test_a_folder_that_exists_keeps_its_mode(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    private_dir(shared / "mine")
    assert _mode(shared) == 0o755
    assert _mode(shared / "mine") == 0o700
    assert private_dir(shared / "mine") == shared / "mine"
