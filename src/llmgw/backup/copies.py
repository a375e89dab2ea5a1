"""Copies of a finished archive at each `backup_copy_to` destination, pruned there to the
newest `backup_keep` as here.

A copy is written under a `.partial` name and renamed when whole, so a destination
never holds half an archive under an archive's name. SSH destinations are reached with
asyncssh (SFTP) and `backup_copy_key`; the host's key is checked against the known-hosts
file, which learns a host the first time it is reached (trust on first use) and refuses
it afterwards if its key changes.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import asyncssh

from llmgw.backup.names import PARTIAL_SUFFIX, to_prune
from llmgw.config.backup import CopyTarget
from llmgw.core.private_dirs import private_dir
from llmgw.errors import BackupError

log = logging.getLogger(__name__)
SSH_CONNECT_TIMEOUT_S = 30.0


def copy_to_directory(archive: Path, directory: Path, keep: int) -> None:
    """Copies `archive` into `directory` (made 0700 if absent) and prunes there."""
    try:
        private_dir(directory)
        partial = directory / (archive.name + PARTIAL_SUFFIX)
        shutil.copyfile(archive, partial)
        partial.chmod(0o600)
        os.replace(partial, directory / archive.name)
        prune_directory(directory, keep)
    except OSError as exc:
        raise BackupError(
            f"backup_copy_to {directory}: the copy failed ({exc.strerror}): check the directory"
        ) from exc


def prune_directory(directory: Path, keep: int) -> list[str]:
    """Deletes the archives in `directory` beyond the newest `keep`; returns their names."""
    gone = to_prune(os.listdir(directory), keep)
    for name in gone:
        (directory / name).unlink(missing_ok=True)
    return gone


def _host_pattern(target: CopyTarget) -> str:
    return target.host if target.port == 22 else f"[{target.host}]:{target.port}"


def _known(known_hosts: Path, pattern: str) -> bool:
    try:
        lines = known_hosts.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return False
    return any(pattern in line.split(maxsplit=1)[0].split(",") for line in lines if line.strip())


def _learn(known_hosts: Path, pattern: str, key: asyncssh.SSHKey) -> None:
    private_dir(known_hosts.parent)
    line = f"{pattern} {key.export_public_key('openssh').decode('ascii').strip()}\n"
    fd = os.open(known_hosts, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with os.fdopen(fd, "a", encoding="ascii") as out:
        out.write(line)
    log.warning("backup_copy_to: learnt the SSH host key of %s into %s", pattern, known_hosts)


async def copy_over_ssh(
    archive: Path, target: CopyTarget, key_file: Path, known_hosts: Path, keep: int
) -> None:
    """Uploads `archive` into `target`'s directory over SFTP and prunes there."""
    pattern = _host_pattern(target)
    where = f"backup_copy_to ssh://{target.user}@{pattern}{target.path}"
    learning = not _known(known_hosts, pattern)
    try:
        async with asyncssh.connect(
            target.host,
            target.port,
            username=target.user,
            client_keys=[str(key_file)],
            known_hosts=None if learning else str(known_hosts),
            connect_timeout=SSH_CONNECT_TIMEOUT_S,
            config=None,
        ) as conn:
            if learning:
                server_key = conn.get_server_host_key()
                if server_key is None:
                    raise BackupError(f"{where}: the host showed no key to check")
                _learn(known_hosts, pattern, server_key)
            async with conn.start_sftp_client() as sftp:
                await sftp.makedirs(target.path, exist_ok=True)
                partial = f"{target.path}/{archive.name}{PARTIAL_SUFFIX}"
                await sftp.put(str(archive), partial)
                await sftp.posix_rename(partial, f"{target.path}/{archive.name}")
                for name in to_prune(await sftp.listdir(target.path), keep):
                    await sftp.remove(f"{target.path}/{name}")
    except asyncssh.HostKeyNotVerifiable as exc:
        raise BackupError(
            f"{where}: the host's key is not the one in {known_hosts}: "
            "if the host was rebuilt, remove its line"
        ) from exc
    except asyncssh.PermissionDenied as exc:
        raise BackupError(
            f"{where}: the host refused backup_copy_key {key_file}: add its public key there"
        ) from exc
    except (asyncssh.Error, OSError) as exc:
        raise BackupError(f"{where}: the copy failed: {exc}") from exc
