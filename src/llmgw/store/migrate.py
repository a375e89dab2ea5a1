"""Bringing a store's schema up to date in place, with Alembic, when llmgw starts.

Upgrades run inside one transaction on the connection given to Alembic, so a store is
either at the old version or the new one, never between. On PostgreSQL a transaction
advisory lock makes gateways that start together upgrade one after another, the later
ones finding nothing left to do.
"""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.ext.asyncio import AsyncEngine

from llmgw.store.engine import transaction

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
# Any constant of our own; gateways upgrading one store take turns on it.
_PG_MIGRATION_LOCK = 0x6C6C6D6777


def _config(connection: sa.Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["connection"] = connection
    return config


def revisions() -> list[str]:
    """Every schema version, oldest first."""
    script = ScriptDirectory.from_config(_config())
    return [rev.revision for rev in reversed(list(script.walk_revisions()))]


def head() -> str:
    return revisions()[-1]


def _upgrade(connection: sa.Connection, target: str) -> None:
    if connection.dialect.name == "postgresql":
        connection.execute(sa.text("SELECT pg_advisory_xact_lock(:lock)"), {"lock": _PG_MIGRATION_LOCK})
    command.upgrade(_config(connection), target)


def _current(connection: sa.Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


async def upgrade(engine: AsyncEngine, target: str = "head") -> None:
    """Brings the schema to `target` (the newest by default); does nothing when it is there."""
    async with transaction(engine) as conn:
        await conn.run_sync(_upgrade, target)


async def current_revision(engine: AsyncEngine) -> str | None:
    """The store's schema version, or None for an empty database."""
    async with transaction(engine) as conn:
        return await conn.run_sync(_current)
