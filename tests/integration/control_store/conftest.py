"""A PostgreSQL database per test for the control-store tests, on the server of
tests/integration/conftest.py (skipped, with the reason, only where none can be had)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from support.postgres import new_database


@pytest.fixture
def pg_location(postgres_server: str) -> Iterator[str]:
    """A new, empty database of this test's own, dropped afterwards."""
    with new_database(postgres_server, "llmgw_ctl") as location:
        yield location


@pytest.fixture(params=["sqlite", "postgresql"])
def blank_location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store location with no schema at all: a new SQLite file, or a new database."""
    if request.param == "sqlite":
        return str(tmp_path / "blank.db")
    location: str = request.getfixturevalue("pg_location")
    return location
