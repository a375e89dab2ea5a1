"""The admin token file: made 0600, kept, narrowed when too open; checked in constant time."""

from __future__ import annotations

import stat
from pathlib import Path

from llmgw.admin import token as admin_token


def test_made_once_with_mode_0600(tmp_path: Path) -> None:
    path = tmp_path / "secrets" / "admin-token"
    token = admin_token.load_or_create(path)
    assert len(token) >= 40
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert admin_token.load_or_create(path) == token


def test_a_file_readable_by_others_is_narrowed(tmp_path: Path) -> None:
    path = tmp_path / "admin-token"
    path.write_text("sekrit\n")
    path.chmod(0o644)
    assert admin_token.load_or_create(path) == "sekrit"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_matches_only_the_bearer_token() -> None:
    assert admin_token.matches("abc", "Bearer abc")
    assert not admin_token.matches("abc", "Bearer abd")
    assert not admin_token.matches("abc", "Basic abc")
    assert not admin_token.matches("abc", None)
