"""Packing an archive's members with their manifest, and reading one back whole.

Writing: the members are staged as files in a private directory, hashed, tarred with
gzip (level 1: the store is most of the bytes, and a faster pass keeps the backup well
inside a minute at a million usage records) and, with recipients, encrypted.

Reading: decrypted (when it begins with age's header) and unpacked into a private
directory, each member under its manifest name only (a name outside the manifest, a
link or a path that climbs is refused), every hash compared: the archive is known good
before a restore changes anything.
"""

from __future__ import annotations

import hashlib
import tarfile
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from llmgw.backup import crypt
from llmgw.backup.manifest import MANIFEST, Manifest, check_members, parse_manifest
from llmgw.config.backup import BackupRecipient
from llmgw.core.private_dirs import private_dir
from llmgw.errors import BackupError

COMPRESS_LEVEL = 1
_CHUNK = 1 << 20


def pack(staged: Path, manifest: Manifest, out: Path, recipients: Sequence[BackupRecipient]) -> None:
    """Writes the archive of `staged`'s members (named as in `manifest`) to `out`."""
    plain = out if not recipients else out.with_name(out.name + ".tar")
    with tarfile.open(plain, "w:gz", compresslevel=COMPRESS_LEVEL) as tar:
        manifest_file = staged / MANIFEST
        manifest_file.write_bytes(manifest.to_json())
        tar.add(manifest_file, arcname=MANIFEST, recursive=False, filter=_plain)
        for name in sorted(manifest.members):
            tar.add(staged / name, arcname=name, recursive=False, filter=_plain)
    if recipients:
        try:
            crypt.encrypt(plain, out, recipients)
        finally:
            plain.unlink(missing_ok=True)
    out.chmod(0o600)


def _plain(info: tarfile.TarInfo) -> tarfile.TarInfo:
    # Owner names and ids of this machine mean nothing where it is restored.
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def unpack(archive: Path, work: Path, identities: Sequence[Any] | None) -> Manifest:
    """Opens `archive` into `work` (members at their manifest names) and checks it whole;
    BackupError in one sentence saying what is wrong and what to do."""
    try:
        encrypted = crypt.is_encrypted(archive)
    except OSError as exc:
        raise BackupError(f"{archive}: cannot be read ({exc.strerror}): give the archive's path") from exc
    source = archive
    if encrypted:
        if not identities:
            raise BackupError(
                f"{archive.name} is encrypted: give --identity with the age key file that opens it"
            )
        source = work / "archive.tar.gz"
        crypt.decrypt(archive, source, identities)
    try:
        digests, manifest_bytes = _extract(source, work / "members")
    except (tarfile.TarError, EOFError, OSError, ValueError) as exc:
        raise BackupError(
            f"{archive.name} is damaged or not an llmgw archive ({exc}): use another archive"
        ) from exc
    finally:
        if source != archive:
            source.unlink(missing_ok=True)
    if manifest_bytes is None:
        raise BackupError(f"{archive.name} holds no {MANIFEST}: it is not an llmgw archive")
    try:
        manifest = parse_manifest(manifest_bytes)
        check_members(manifest, digests)
    except ValueError as exc:
        raise BackupError(f"{archive.name} cannot be restored: {exc}") from exc
    return manifest


def _extract(source: Path, into: Path) -> tuple[dict[str, str], bytes | None]:
    into.mkdir(mode=0o700)
    digests: dict[str, str] = {}
    manifest: bytes | None = None
    with tarfile.open(source, "r:gz") as tar:
        for info in tar:
            name = info.name
            parts = PurePosixPath(name).parts
            if not info.isfile() or not parts or ".." in parts or name.startswith("/") or name in digests:
                raise ValueError(f"member {name!r} is not a plain file of an archive")
            handle = tar.extractfile(info)
            if handle is None:
                raise ValueError(f"member {name!r} has no contents")
            if name == MANIFEST:
                manifest = handle.read()
                continue
            target = into.joinpath(*parts)
            private_dir(target.parent)
            digest = hashlib.sha256()
            with target.open("wb") as out:
                while chunk := handle.read(_CHUNK):
                    digest.update(chunk)
                    out.write(chunk)
            target.chmod(0o600)
            digests[name] = digest.hexdigest()
    return digests, manifest
