"""A PostgreSQL server for the auth tests, and a fresh store per test on SQLite and on
PostgreSQL.

`scripts/test-postgres.sh` provides the server: the one on 127.0.0.1:5432 where it
runs, else a throwaway cluster it starts (stopped again at the end of the session).
Its DSN is put in LLMGW_TEST_POSTGRES_DSN for the session. Only when the script says
it cannot provide a server are the PostgreSQL cases skipped, with its reason. Each
test module gets its own database; each test starts from empty tables.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest
from auth_store_helpers import empty_tables
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "test-postgres.sh"
CANNOT = 3


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str | None]:
    """The server's DSN (to its maintenance database), or None with the reason printed."""
    with tempfile.TemporaryDirectory() as state_dir:
        state = Path(state_dir) / "cluster"
        env = {**os.environ, "LLMGW_TEST_POSTGRES_STATE": str(state)}
        done = subprocess.run(
            ["bash", str(SCRIPT)], capture_output=True, text=True, env=env, timeout=120, check=False
        )
        if done.returncode == CANNOT:
            pytest.skip(f"no PostgreSQL for the tests: {done.stderr.strip()}")
        assert done.returncode == 0, f"scripts/test-postgres.sh failed: {done.stderr}"
        dsn = done.stdout.strip().splitlines()[-1]
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("LLMGW_TEST_POSTGRES_DSN", dsn)
            try:
                yield dsn
            finally:
                if state.exists():
                    subprocess.run(
                        ["bash", str(SCRIPT), "stop", state.read_text().strip()], check=False, timeout=60
                    )


async def _admin(dsn: str, statement: str) -> None:
    url = make_url(dsn)
    conn = await asyncpg.connect(
        host=url.host, port=url.port or 5432, user=url.username, password=url.password, database=url.database
    )
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


@pytest.fixture(scope="module")
def postgres_database(postgres_server: str) -> Iterator[str]:
    """A database of this module's own on the server, dropped afterwards."""
    name = f"llmgw_test_{secrets.token_hex(4)}"
    asyncio.run(_admin(postgres_server, f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(postgres_server).set(database=name).render_as_string(hide_password=False)
    finally:
        asyncio.run(_admin(postgres_server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


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
    name = f"llmgw_blank_{secrets.token_hex(4)}"
    asyncio.run(_admin(server, f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(server).set(database=name).render_as_string(hide_password=False)
    finally:
        asyncio.run(_admin(server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
