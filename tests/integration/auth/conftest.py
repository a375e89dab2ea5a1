"""A fresh store per test for the auth tests, on SQLite and on PostgreSQL (the server
of tests/integration/conftest.py; skipped, with the reason, only where none can be had).
Each test module gets its own database; each test starts from empty tables.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from auth_store_helpers import empty_tables

from support.postgres import new_database


@pytest.fixture(scope="module")
def postgres_database(postgres_server: str) -> Iterator[str]:
    """A database of this module's own on the server, dropped afterwards."""
    with new_database(postgres_server) as location:
        yield location


@pytest.fixture(params=["sqlite", "postgresql"])
def store_location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a test's store lives: a new SQLite file, or this module's PostgreSQL
    database emptied."""
    if request.param == "sqlite":
        return str(tmp_path / "llmgw.db")
    location: str = request.getfixturevalue("postgres_database")
    asyncio.run(empty_tables(location))
    return location


@pytest.fixture
def postgres_location(postgres_database: str) -> str:
    """This module's PostgreSQL database, emptied, for tests that need PostgreSQL itself."""
    asyncio.run(empty_tables(postgres_database))
    return postgres_database


@pytest.fixture(params=["sqlite", "postgresql"])
def blank_store_location(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store location with no schema at all: a new SQLite file, or a new database."""
    if request.param == "sqlite":
        yield str(tmp_path / "blank.db")
        return
    server: str = request.getfixturevalue("postgres_server")
    with new_database(server, "llmgw_blank") as location:
        yield location
