"""A PostgreSQL database per test for the control-store tests, from the server
`scripts/test-postgres.sh` provides (the one on 127.0.0.1:5432 where it runs, else a
throwaway cluster it starts and stops). The PostgreSQL cases are skipped only when the
script says it cannot provide a server, with its reason."""

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
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "test-postgres.sh"
CANNOT = 3


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """The server's DSN (to its maintenance database)."""
    with tempfile.TemporaryDirectory() as state_dir:
        state = Path(state_dir) / "cluster"
        env = {**os.environ, "LLMGW_TEST_POSTGRES_STATE": str(state)}
        done = subprocess.run(
            ["bash", str(SCRIPT)], capture_output=True, text=True, env=env, timeout=120, check=False
        )
        if done.returncode == CANNOT:
            pytest.skip(f"no PostgreSQL for the tests: {done.stderr.strip()}")
        assert done.returncode == 0, f"scripts/test-postgres.sh failed: {done.stderr}"
        try:
            yield done.stdout.strip().splitlines()[-1]
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


@pytest.fixture
def pg_location(pg_server: str) -> Iterator[str]:
    """A new, empty database of this test's own, dropped afterwards."""
    name = f"llmgw_ctl_{secrets.token_hex(4)}"
    asyncio.run(_admin(pg_server, f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(pg_server).set(database=name).render_as_string(hide_password=False)
    finally:
        asyncio.run(_admin(pg_server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(params=["sqlite", "postgresql"])
def blank_location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store location with no schema at all: a new SQLite file, or a new database."""
    if request.param == "sqlite":
        return str(tmp_path / "blank.db")
    location: str = request.getfixturevalue("pg_location")
    return location
