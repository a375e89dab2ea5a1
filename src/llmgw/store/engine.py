"""Opening the store's database: a SQLite file by default, PostgreSQL for a URL.

`auth.store` is either a path (SQLite, in WAL mode so readers never wait on the usage
writer) or a `postgresql://` URL, so several gateways share keys, limits and usage.
Driver and database exceptions are turned into llmgw's own here, where they enter:
anything about reaching the database becomes `StoreUnavailable`, a broken uniqueness or
reference `StoreConflict`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from llmgw.errors import StoreConflict, StoreUnavailable

_POSTGRES_SCHEMES = ("postgresql://", "postgres://", "postgresql+asyncpg://")
# A query that has not answered in this long is a store that is not there: the loops
# that use it retry, and nothing on the request path waits for it.
CONNECT_TIMEOUT_S = 5.0
COMMAND_TIMEOUT_S = 30.0
SQLITE_BUSY_TIMEOUT_MS = 10_000


def is_postgres(location: str) -> bool:
    return location.startswith(_POSTGRES_SCHEMES)


def database_url(location: str) -> sa.URL:
    """The SQLAlchemy URL for `auth.store`: a path or a postgresql:// URL."""
    if is_postgres(location):
        url = make_url(location)
        return url.set(drivername="postgresql+asyncpg")
    if location.startswith("sqlite"):
        return make_url(location).set(drivername="sqlite+aiosqlite")
    return sa.URL.create("sqlite+aiosqlite", database=str(Path(location).expanduser()))


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    for pragma in (
        "PRAGMA journal_mode=WAL",
        "PRAGMA synchronous=NORMAL",
        f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}",
        "PRAGMA foreign_keys=ON",
    ):
        cursor.execute(pragma)
    cursor.close()


def create_engine(location: str) -> AsyncEngine:
    """An engine for `auth.store`; creating it opens no connection yet."""
    url = database_url(location)
    if url.drivername.startswith("sqlite"):
        if url.database and url.database != ":memory:":
            Path(url.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_async_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        return engine
    return create_async_engine(
        url,
        pool_size=5,
        max_overflow=5,
        pool_pre_ping=True,
        pool_timeout=CONNECT_TIMEOUT_S,
        connect_args={"timeout": CONNECT_TIMEOUT_S, "command_timeout": COMMAND_TIMEOUT_S},
    )


def describe(location: str) -> str:
    """The store's location without a password, for messages and logs."""
    if is_postgres(location):
        return make_url(location).render_as_string(hide_password=True)
    return location


@asynccontextmanager
async def transaction(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """A connection in a transaction, committed on success; database exceptions come out
    as `StoreUnavailable` or `StoreConflict`."""
    try:
        async with engine.begin() as conn:
            yield conn
    except sa.exc.IntegrityError as exc:
        raise StoreConflict(_first_line(exc)) from exc
    except (sa.exc.OperationalError, sa.exc.InterfaceError, sa.exc.TimeoutError) as exc:
        raise StoreUnavailable(f"the store did not answer: {_first_line(exc)}") from exc
    except sa.exc.DBAPIError as exc:
        if exc.connection_invalidated:
            raise StoreUnavailable(f"the store connection broke: {_first_line(exc)}") from exc
        raise
    except (OSError, TimeoutError) as exc:
        raise StoreUnavailable(f"the store could not be reached: {exc}") from exc


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc)
    return text.splitlines()[0] if text else type(exc).__name__


def upsert(conn: AsyncConnection, table: sa.Table) -> postgresql.Insert | sqlite.Insert:
    """An INSERT that can take ON CONFLICT, in the connection's dialect (both databases
    spell it the same way)."""
    if conn.dialect.name == "postgresql":
        return postgresql.insert(table)
    return sqlite.insert(table)
