"""A PostgreSQL server for the tests, and databases of their own on it.

`scripts/test-postgres.sh` provides the server: the one on 127.0.0.1:5432 where it
runs, else a throwaway cluster it starts (and `stop_server` stops). Only when the
script says it cannot provide one (exit status 3) are the PostgreSQL cases skipped,
with its reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "test-postgres.sh"
CANNOT = 3


@contextlib.contextmanager
def postgres_server() -> Iterator[str]:
    """The server's DSN (to its maintenance database), for as long as the block runs;
    `pytest.skip` with the script's reason when there can be none."""
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


@contextlib.contextmanager
def new_database(server: str, prefix: str = "llmgw_test") -> Iterator[str]:
    """A new, empty database on `server` (its store location), dropped afterwards."""
    name = f"{prefix}_{secrets.token_hex(4)}"
    asyncio.run(_admin(server, f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(server).set(database=name).render_as_string(hide_password=False)
    finally:
        asyncio.run(_admin(server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
