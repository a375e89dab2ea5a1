"""Opening the store's database: a SQLite file by default, PostgreSQL for a URL.

`auth.store` is either a path (SQLite, with a rollback journal and no memory map, so a
fault on its files is an error rather than a SIGBUS: see `SQLITE_PRAGMAS`) or a
`postgresql://` URL, so several gateways share keys, limits and usage.
Driver and database exceptions are turned into llmgw's own here, where they enter:
anything about reaching the database becomes `StoreUnavailable`, a broken uniqueness or
reference `StoreConflict`. `SqliteWorker` is the one path beside the engine: the usage
batch's transaction on SQLite, run whole on a thread of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar, cast

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from llmgw.core.private_dirs import private_dir
from llmgw.errors import StoreConflict, StoreError, StoreUnavailable

T = TypeVar("T")

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


SQLITE_PRAGMAS = (
    # A rollback journal, not WAL: WAL keeps its index in the `-shm` file mapped into
    # memory by every connection, whatever `mmap_size` says, and a fault on that map
    # (the file truncated or its disk gone under traffic) is a SIGBUS that kills the
    # gateway with no log line and every buffered record. With a rollback journal and
    # no memory map, every fault comes back from a read or write as an error SQLite
    # reports, which the usage writer retries and the gateway logs. The price: a
    # reader waits for a commit in progress (milliseconds; writes are one batch a
    # second), where in WAL mode it never did. A database found in WAL mode is turned
    # back at the first connection (the busy timeout first: that takes a lock).
    f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}",
    "PRAGMA journal_mode=DELETE",
    "PRAGMA mmap_size=0",
    "PRAGMA synchronous=NORMAL",
    "PRAGMA foreign_keys=ON",
)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    for pragma in SQLITE_PRAGMAS:
        cursor.execute(pragma)
    cursor.close()


FILE_MODE = 0o600


def create_private(path: Path) -> None:
    """Makes the store's file, empty (which SQLite takes for an empty database), readable
    by its owner only, in a directory only its owner can enter, where llmgw creates them:
    the store holds key hashes, usage and spend. SQLite gives the `-wal` and `-shm` files
    it makes beside the database (the journal) the database file's mode, so they are
    0600 too. A file
    or directory that is already there is left as it is (its owner chose its mode)."""
    private_dir(path.parent)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        return
    os.close(fd)


def create_engine(location: str) -> AsyncEngine:
    """An engine for `auth.store`; creating it opens no connection yet."""
    url = database_url(location)
    if url.drivername.startswith("sqlite"):
        if url.database and url.database != ":memory:" and not url.database.startswith("file:"):
            create_private(Path(url.database))
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
        if isinstance(exc, sa.exc.DatabaseError) and not isinstance(
            exc, sa.exc.ProgrammingError | sa.exc.DataError
        ):
            # A file gone bad under the store (SQLite's "disk image is malformed"): a
            # fault of the store's, which the loops using it retry, not a crash of theirs.
            raise StoreUnavailable(f"the store failed: {_first_line(exc)}") from exc
        raise
    except (OSError, TimeoutError) as exc:
        raise StoreUnavailable(f"the store could not be reached: {exc}") from exc


# The sqlite3 module binds a None or a bool only after looking for an adapter for it,
# and without one the look makes and drops an AttributeError each time: a quarter of a
# microsecond a value, and a usage record holds several. With these registered (C
# functions: None for None, 0 or 1 for a bool) it finds one at once and binds what SQLite
# stores anyway. Process-wide, and the same values for every other connection.
_NOTHING: dict[None, None] = {}
sqlite3.register_adapter(type(None), _NOTHING.get)
sqlite3.register_adapter(bool, int)


def sqlite_file(url: sa.URL) -> str | None:
    """The file of a SQLite URL, for a connection of llmgw's own beside the engine's;
    None for an in-memory database (a second connection would see another, empty one)
    or a `file:` URI, whose options only the engine's connection would apply."""
    database = url.database
    if not url.drivername.startswith("sqlite") or url.query:
        return None
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return database


def connect_sqlite(path: str) -> sqlite3.Connection:
    """A plain sqlite3 connection to the store's file with the engine's pragmas, in
    autocommit mode: its user says BEGIN and COMMIT itself."""
    conn = sqlite3.connect(path, timeout=SQLITE_BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    try:
        _sqlite_pragmas(conn, None)
    except BaseException:
        conn.close()
        raise
    return conn


def sqlite_error(exc: sqlite3.Error) -> StoreError:
    """llmgw's error for one of the sqlite3 module's, as `transaction` turns the same ones
    coming through SQLAlchemy; one it would let through is a `StoreError` here, so the
    usage writer retries it rather than dying of it."""
    if isinstance(exc, sqlite3.IntegrityError):
        return StoreConflict(_first_line(exc))
    if isinstance(exc, sqlite3.OperationalError | sqlite3.InterfaceError):
        return StoreUnavailable(f"the store did not answer: {_first_line(exc)}")
    return StoreError(f"the store failed: {_first_line(exc)}")


class SqliteWorker:
    """A sqlite3 connection of its own on a thread of its own, for a write of many
    statements that is one call there.

    Through SQLAlchemy's async engine every statement is a round trip to aiosqlite's
    thread (a future, a greenlet switch, a wake-up of the event loop): a usage batch's
    BEGIN, its INSERT per 256 records, the sums, the spend and COMMIT were a hop each,
    and 7 µs of CPU a record through `store.usage.write_batch` in batches of 512. Here
    the whole transaction is one function run on this thread, one hop a batch: 3 µs,
    what the sqlite3 module's own statements cost run directly.
    One thread, so writes keep their order and the connection is only ever used where
    it was opened; it opens on the first write. The store makes one for a SQLite file
    and its repositories share it (usage batches, the limit exchange, spend totals)."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._executor: ThreadPoolExecutor | None = None
        self._conn: sqlite3.Connection | None = None  # used on the worker thread only

    async def transaction(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Runs `work` between BEGIN IMMEDIATE and COMMIT on the worker thread (ROLLBACK if
        it raises) and returns what it returns; sqlite3's exceptions come out as
        `StoreError`s.

        Cancelled, the call does not wait: the thread finishes the transaction, and rolls
        it back unless COMMIT had begun, since the caller takes the write as not done and
        will make it again. Either way the transaction ends in the call that began it, so
        the next one starts from a fresh BEGIN."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="llmgw-sqlite")
        abandoned = threading.Event()
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, self._run, work, abandoned)
        except asyncio.CancelledError:
            abandoned.set()
            raise
        except sqlite3.Error as exc:
            raise sqlite_error(exc) from exc

    def _run(self, work: Callable[[sqlite3.Connection], T], abandoned: threading.Event) -> T:
        if self._conn is None:
            self._conn = connect_sqlite(self._path)
        conn = self._conn
        # IMMEDIATE: the write lock is taken (or waited for) now, not half-way through.
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Abandoned (its caller cancelled), the work is not done, or undone: the
            # caller takes it as not done, and nobody reads the result.
            result = None if abandoned.is_set() else work(conn)
            conn.execute("ROLLBACK" if abandoned.is_set() else "COMMIT")
        except BaseException:
            self._roll_back(conn)
            raise
        return cast(T, result)

    def _roll_back(self, conn: sqlite3.Connection) -> None:
        if not conn.in_transaction:
            return  # SQLite ended it itself (a full disk, an I/O error)
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            # A connection whose transaction may still be open is not used again.
            self._discard()

    def _discard(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(sqlite3.Error):
                conn.close()

    async def close(self) -> None:
        """Closes the connection once the writes given before are done, and ends the
        thread; a later write opens both again, as the engine does after `dispose`."""
        executor, self._executor = self._executor, None
        if executor is None:
            return
        try:
            await asyncio.get_running_loop().run_in_executor(executor, self._discard)
        except BaseException:
            # Cancelled: the thread still closes the connection, then ends, unwaited for.
            executor.shutdown(wait=False)
            raise
        executor.shutdown(wait=True)  # idle by now: only the thread's exit is waited for


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc)
    return text.splitlines()[0] if text else type(exc).__name__


def upsert(conn: AsyncConnection, table: sa.Table) -> postgresql.Insert | sqlite.Insert:
    """An INSERT that can take ON CONFLICT, in the connection's dialect (both databases
    spell it the same way)."""
    if conn.dialect.name == "postgresql":
        return postgresql.insert(table)
    return sqlite.insert(table)
