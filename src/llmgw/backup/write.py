"""`llmgw server backup`: one archive of the store (the runtime catalog, keys, tenancy,
limits and usage are all in it), the cluster CA's files (`agent_tls`) and the
configuration file, written into `backup_dir`, copied to each `backup_copy_to`, and the
newest `backup_keep` kept everywhere.

The same function runs from the command line and on the server's schedule; its file
and database work runs on threads, so a server's event loop keeps serving meanwhile.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import llmgw
from llmgw.backup import archive, copies, snapshot
from llmgw.backup.manifest import POSTGRES_MEMBER, SQLITE_MEMBER, Manifest, sha256_file
from llmgw.backup.names import PARTIAL_SUFFIX, archive_name, to_prune
from llmgw.config.backup import KNOWN_HOSTS_FILE, parse_copy_target
from llmgw.config.server import Settings
from llmgw.core.private_dirs import private_dir
from llmgw.errors import BackupError

CA_ROLES = ("ca_file", "cert_file", "key_file")


@dataclass(frozen=True)
class Written:
    """What one backup did."""

    path: Path
    copies: tuple[str, ...] = ()
    pruned: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class Sources:
    """Where a backup reads from, resolved from the settings and the configuration's place."""

    store: str
    config_file: Path | None
    backup_dir: Path
    known_hosts: Path


def sources(
    settings: Settings, config_dir: Path | None, state_directory: str | None, config_file: Path | None = None
) -> Sources:
    """Where the backup of a server run with `config_dir` reads and writes; with
    `config_file` (the command line has it) the configuration is archived too."""
    return Sources(
        store=settings.effective_store(config_dir, state_directory),
        config_file=config_file,
        backup_dir=Path(settings.effective_backup_dir),
        known_hosts=(config_dir or Path()) / KNOWN_HOSTS_FILE,
    )


def _stage(settings: Settings, where: Sources, staged: Path, started: float) -> Manifest:
    """Copies every member into `staged` and returns the manifest over them."""
    kind = snapshot.store_kind(where.store)
    (staged / "store").mkdir(mode=0o700)
    if kind == "sqlite":
        revision = snapshot.copy_sqlite(where.store, staged / SQLITE_MEMBER)
    else:
        revision = snapshot.dump_postgres(where.store, staged / POSTGRES_MEMBER)
    origins: dict[str, str] = {}
    files: dict[str, Path] = {}
    for role in CA_ROLES:
        if value := getattr(settings.agent_tls, role):
            files[f"ca/{role}"] = Path(value)
    if where.config_file is not None:
        files[f"config/{where.config_file.name}"] = where.config_file
    modes: dict[str, int] = {}
    for name, source in files.items():
        target = staged / name
        target.parent.mkdir(exist_ok=True, mode=0o700)
        try:
            shutil.copyfile(source, target)
            modes[name] = source.stat().st_mode & 0o777
        except OSError as exc:
            setting = "agent_tls." + name.split("/")[1] if name.startswith("ca/") else "--config"
            raise BackupError(f"{setting} {source}: cannot be read ({exc.strerror}): check the path") from exc
        origins[name] = str(source.resolve())
    members = {name: sha256_file(staged / name) for name in [snapshot_member(kind), *files]}
    return Manifest(
        created=started,
        store_kind=kind,
        schema_revision=revision,
        members=members,
        origins=origins,
        modes=modes,
        llmgw_version=llmgw.__version__,
    )


def snapshot_member(kind: str) -> str:
    return SQLITE_MEMBER if kind == "sqlite" else POSTGRES_MEMBER


def write_archive(settings: Settings, where: Sources, started: float) -> tuple[Path, tuple[str, ...]]:
    """Writes the archive into backup_dir and prunes there; returns it and what was pruned."""
    try:
        private_dir(where.backup_dir)
    except OSError as exc:
        raise BackupError(
            f"backup_dir {where.backup_dir}: cannot be made ({exc.strerror}): set another"
        ) from exc
    recipients = settings.backup_recipient_keys()
    name = archive_name(started, encrypted=bool(recipients))
    final = where.backup_dir / name
    partial = where.backup_dir / (name + PARTIAL_SUFFIX)
    staged = Path(tempfile.mkdtemp(prefix=".staging-", dir=where.backup_dir))
    try:
        manifest = _stage(settings, where, staged, started)
        archive.pack(staged, manifest, partial, recipients)
        os.replace(partial, final)
    except OSError as exc:
        raise BackupError(f"backup_dir {where.backup_dir}: the archive could not be written ({exc})") from exc
    finally:
        shutil.rmtree(staged, ignore_errors=True)
        partial.unlink(missing_ok=True)
    pruned = tuple(to_prune(os.listdir(where.backup_dir), settings.backup_keep))
    for old in pruned:
        (where.backup_dir / old).unlink(missing_ok=True)
    return final, pruned


async def run_backup(settings: Settings, where: Sources, started: float) -> Written:
    """The whole backup: the archive, then its copies. A copy that fails is reported
    after every other destination was tried; the archive stays in backup_dir."""
    path, pruned = await asyncio.to_thread(write_archive, settings, where, started)
    done: list[str] = []
    failures: list[BackupError] = []
    for text in settings.backup_copy_to:
        target = parse_copy_target(text)
        try:
            if target.kind == "dir":
                await asyncio.to_thread(
                    copies.copy_to_directory, path, Path(target.path), settings.backup_keep
                )
            else:
                await copies.copy_over_ssh(
                    path, target, Path(settings.backup_copy_key), where.known_hosts, settings.backup_keep
                )
        except BackupError as exc:
            failures.append(exc)
            continue
        done.append(text)
    if failures:
        raise BackupError(f"{path} was written, but {failures[0]}")
    return Written(path, tuple(done), pruned)
