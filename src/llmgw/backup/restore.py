"""`llmgw server restore ARCHIVE`: the store and the cluster CA's files put back from an
archive, once it is known whole and no server is using the store.

A running server is detected by its own ports: `admin_listen` or `listen` from the
configuration answering a TCP connection (the server holds no lock on a SQLite file
between writes, so a lock would not tell). On PostgreSQL, any other session connected to
the store's database also counts as a server still running (another gateway sharing it,
on another machine).

Everything is checked before anything is touched: the archive opens with the identity,
every member matches its SHA-256 in the manifest, the store is of the configured kind
and at a schema revision this llmgw knows (a newer one would need a newer llmgw), and a
SQLite copy passes SQLite's own check. Then the store is replaced (one rename for
SQLite, one transaction for PostgreSQL), then the CA's files; the server upgrades an
older schema when it starts.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmgw.backup import archive, snapshot
from llmgw.backup.manifest import Manifest
from llmgw.backup.write import CA_ROLES, Sources
from llmgw.config.server import Settings
from llmgw.config.values import split_host_port
from llmgw.core.private_dirs import private_dir
from llmgw.errors import BackupError
from llmgw.store import migrate
from llmgw.store.engine import describe

PORT_CHECK_TIMEOUT_S = 1.0


@dataclass(frozen=True)
class Restored:
    manifest: Manifest
    store: str
    files: tuple[str, ...]


def _answers(address: str) -> bool:
    host, port = split_host_port(address)
    if host in ("", "0.0.0.0", "::"):
        host = "127.0.0.1"
    try:
        with socket.create_connection((host, port), timeout=PORT_CHECK_TIMEOUT_S):
            return True
    except OSError:
        return False


def refuse_running(settings: Settings, store: str) -> None:
    for setting in ("admin_listen", "listen"):
        address = getattr(settings, setting)
        if _answers(address):
            raise BackupError(
                f"a server answers on {setting} {address}: "
                "stop it (systemctl stop llmgw-server) before restoring"
            )
    if snapshot.store_kind(store) == "postgresql":
        others = snapshot.postgres_sessions(store)
        if others:
            raise BackupError(
                f"{others} other session(s) are connected to {describe(store)}: stop every server "
                "using it before restoring"
            )


def _check(manifest: Manifest, store: str, members: Path) -> None:
    kind = snapshot.store_kind(store)
    if manifest.store_kind != kind:
        raise BackupError(
            f"the archive holds a {manifest.store_kind} store and auth.store is {kind}: restore it "
            "with a configuration whose auth.store is of the same kind"
        )
    known = migrate.revisions()
    if manifest.schema_revision not in known:
        raise BackupError(
            f"the archive's store is at schema revision {manifest.schema_revision!r}, which this llmgw "
            f"(newest {known[-1]}) does not know: restore it with the llmgw version that wrote it"
        )
    if (
        kind == "sqlite"
        and snapshot.check_sqlite(members / manifest.store_member) != manifest.schema_revision
    ):
        raise BackupError(
            "the archive's store is not at the schema revision its manifest says: it is damaged"
        )


def _ca_targets(settings: Settings, manifest: Manifest) -> dict[str, Path]:
    """Where each CA member goes: the path configured now, else where it came from."""
    targets: dict[str, Path] = {}
    for role in CA_ROLES:
        name = f"ca/{role}"
        if name in manifest.members:
            configured = getattr(settings.agent_tls, role)
            targets[name] = Path(configured or manifest.origins[name])
    return targets


def _put_file(source: Path, target: Path, mode: int) -> None:
    private_dir(target.parent)
    staged = target.with_name(f".{target.name}.restoring")
    shutil.copyfile(source, staged)
    staged.chmod(mode)
    os.replace(staged, target)


def restore(
    settings: Settings, where: Sources, archive_path: Path, identities: Sequence[Any] | None
) -> Restored:
    refuse_running(settings, where.store)
    kind = snapshot.store_kind(where.store)
    # A SQLite copy is staged beside the store, so its rename stays on one file system.
    base = snapshot.sqlite_path(where.store).parent if kind == "sqlite" else None
    if base is not None:
        private_dir(base)
    work = Path(tempfile.mkdtemp(prefix=".llmgw-restore-", dir=base))
    try:
        manifest = archive.unpack(archive_path, work, identities)
        members = work / "members"
        _check(manifest, where.store, members)
        targets = _ca_targets(settings, manifest)
        # Checked whole: from here on, things change.
        if kind == "sqlite":
            snapshot.replace_sqlite(where.store, members / manifest.store_member)
        else:
            snapshot.restore_postgres(where.store, members / manifest.store_member, work)
        for name, target in targets.items():
            _put_file(members / name, target, manifest.modes.get(name, 0o600))
        return Restored(manifest, describe(where.store), tuple(str(t) for t in targets.values()))
    finally:
        shutil.rmtree(work, ignore_errors=True)
