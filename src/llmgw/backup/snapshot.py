"""A consistent copy of the store, and putting one back.

SQLite: the online backup API (`sqlite3.Connection.backup`) in one step, so the copy is
one moment of the database while the gateway keeps writing: the step holds a read lock,
which only delays the usage writer's next batch (off the request path) for as long as
the copy takes. In steps, every write from the gateway would restart the copy.

PostgreSQL: `pg_dump` (plain SQL, one snapshot of the database), restored by `psql` in
a single transaction that first drops llmgw's tables, so a store is either as it was or
as the archive holds it. The password travels in the environment, never on a command
line another user could read in `ps`.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from collections.abc import Mapping
from pathlib import Path

from sqlalchemy.engine import make_url

from llmgw.core.private_dirs import private_dir
from llmgw.errors import BackupError
from llmgw.store import schema
from llmgw.store.engine import SQLITE_BUSY_TIMEOUT_MS, database_url, describe, is_postgres, sqlite_file

PG_DUMP = "pg_dump"
PSQL = "psql"
PG_TIMEOUT_S = 3600.0
"""Bounds a dump or restore that hangs (a lock never released); far past any real one."""


def store_kind(location: str) -> str:
    return "postgresql" if is_postgres(location) else "sqlite"


def sqlite_path(location: str) -> Path:
    """The SQLite file of `auth.store`; BackupError for an in-memory or `file:` store."""
    path = sqlite_file(database_url(location))
    if path is None:
        raise BackupError(f"auth.store {location!r}: only a SQLite file or PostgreSQL can be backed up")
    return Path(path)


def copy_sqlite(location: str, out: Path) -> str:
    """Copies the SQLite store into `out`; returns its schema revision."""
    path = sqlite_path(location)
    if not path.is_file():
        raise BackupError(f"auth.store {path}: no such file: start the server once, or check the path")
    try:
        source = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=SQLITE_BUSY_TIMEOUT_MS / 1000)
        try:
            target = sqlite3.connect(out)
            try:
                source.backup(target)
                revision = _sqlite_revision(target)
            finally:
                target.close()
        finally:
            source.close()
    except sqlite3.Error as exc:
        raise BackupError(f"auth.store {path}: SQLite could not copy it: {exc}") from exc
    out.chmod(0o600)
    return revision


def _sqlite_revision(conn: sqlite3.Connection) -> str:
    try:
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    except sqlite3.OperationalError:
        row = None
    if row is None:
        raise BackupError("auth.store holds no llmgw schema yet: start the server once before backing it up")
    return str(row[0])


def check_sqlite(path: Path) -> str:
    """The schema revision of a SQLite copy, after SQLite's own quick check of its pages."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            verdict = conn.execute("PRAGMA quick_check").fetchone()
            if verdict is None or verdict[0] != "ok":
                raise BackupError(f"the store in the archive fails SQLite's check: {verdict}")
            return _sqlite_revision(conn)
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise BackupError(f"the store in the archive is not a SQLite database: {exc}") from exc


def replace_sqlite(location: str, copy: Path) -> None:
    """Puts the checked `copy` in place of the store's file in one rename. A journal left
    beside the old file would be played back onto the new one, so it goes first."""
    path = sqlite_path(location)
    private_dir(path.parent)
    staged = path.with_name(f".{path.name}.restoring")
    shutil.copyfile(copy, staged)
    staged.chmod(0o600)
    with staged.open("rb") as handle:
        os.fsync(handle.fileno())
    for leftover in ("-journal", "-wal", "-shm"):
        path.with_name(path.name + leftover).unlink(missing_ok=True)
    os.replace(staged, path)


def libpq_env(location: str) -> dict[str, str]:
    """The environment that points libpq's tools at `auth.store`."""
    url = make_url(location)
    # The operator's own PG* settings (a CA file, a service file) stand where the URL is silent.
    env = dict(os.environ)
    pairs: Mapping[str, object] = {
        "PGHOST": url.host,
        "PGPORT": url.port,
        "PGUSER": url.username,
        "PGPASSWORD": url.password,
        "PGDATABASE": url.database,
        "PGSSLMODE": url.query.get("sslmode"),
    }
    env.update({key: str(value) for key, value in pairs.items() if value})
    return env


def _run(command: list[str], location: str, what: str) -> str:
    try:
        done = subprocess.run(
            command,
            env=libpq_env(location),
            capture_output=True,
            text=True,
            timeout=PG_TIMEOUT_S,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except FileNotFoundError as exc:
        raise BackupError(f"{command[0]} is not installed: install PostgreSQL's client tools") from exc
    except subprocess.TimeoutExpired as exc:
        raise BackupError(f"{what} of {describe(location)} did not finish in {PG_TIMEOUT_S:.0f} s") from exc
    if done.returncode != 0:
        detail = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise BackupError(f"{what} of {describe(location)} failed: {detail}")
    return done.stdout


def dump_postgres(location: str, out: Path) -> str:
    """Dumps the PostgreSQL store into `out` (plain SQL); returns its schema revision."""
    _run(
        [PG_DUMP, "--no-owner", "--no-privileges", "--clean", "--if-exists", "--file", str(out)],
        location,
        "pg_dump",
    )
    out.chmod(0o600)
    return postgres_revision(location)


def postgres_revision(location: str) -> str:
    revision = _run(
        [PSQL, "-X", "-q", "-t", "-A", "-c", "SELECT version_num FROM alembic_version"], location, "psql"
    ).strip()
    if not revision:
        raise BackupError("auth.store holds no llmgw schema yet: start the server once before backing it up")
    return revision


def postgres_sessions(location: str) -> int:
    """How many other sessions are connected to the store's database now."""
    count = _run(
        [
            PSQL,
            "-X",
            "-q",
            "-t",
            "-A",
            "-c",
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()",
        ],
        location,
        "psql",
    )
    return int(count.strip() or 0)


def restore_postgres(location: str, dump: Path, work: Path) -> None:
    """Replaces llmgw's tables in the PostgreSQL store with the dump's, in one transaction."""
    tables = [*(table.name for table in schema.metadata.sorted_tables), "alembic_version"]
    script = work / "restore.sql"
    with script.open("w", encoding="utf-8") as out:
        for name in tables:
            out.write(f'DROP TABLE IF EXISTS "{name}" CASCADE;\n')
        with dump.open(encoding="utf-8") as source:
            shutil.copyfileobj(source, out)
    script.chmod(0o600)
    _run(
        [PSQL, "-X", "-q", "-v", "ON_ERROR_STOP=1", "--single-transaction", "-f", str(script)],
        location,
        "psql (the restore)",
    )
