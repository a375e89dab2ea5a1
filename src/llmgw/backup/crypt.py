"""Encrypting an archive with age to `backup_recipients`, and opening one with an
identity file, through pyrage (the Rust age implementation's Python binding).

An encrypted archive begins with age's header line, so a restore tells the two kinds
apart by their first bytes, not by the file's name (which a copy may have changed).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyrage

from llmgw.config.backup import BackupRecipient
from llmgw.errors import BackupError

AGE_HEADER = b"age-encryption.org/v1\n"
_AGE_SECRET = "AGE-SECRET-KEY-1"


def is_encrypted(path: Path) -> bool:
    with path.open("rb") as source:
        return source.read(len(AGE_HEADER)) == AGE_HEADER


def _recipient(recipient: BackupRecipient) -> Any:
    if recipient.kind == "age":
        return pyrage.x25519.Recipient.from_str(recipient.key)
    return pyrage.ssh.Recipient.from_str(recipient.key)


def encrypt(plain: Path, out: Path, recipients: Sequence[BackupRecipient]) -> None:
    """Writes `plain` encrypted to every one of `recipients` (any one key opens it)."""
    try:
        pyrage.encrypt_file(str(plain), str(out), [_recipient(r) for r in recipients])
    except (pyrage.EncryptError, pyrage.RecipientError, ValueError) as exc:
        raise BackupError(f"backup_recipients: age could not encrypt to them: {exc}") from exc


def read_identities(path: Path) -> list[Any]:
    """The identities in an age key file (`age-keygen`'s AGE-SECRET-KEY-1… lines) or an
    unencrypted SSH private key; BackupError naming --identity otherwise."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise BackupError(
            f"--identity {path}: cannot be read ({exc.strerror}): give the age key file"
        ) from exc
    text = data.decode("utf-8", errors="replace")
    try:
        if "PRIVATE KEY-----" in text:
            return [pyrage.ssh.Identity.from_buffer(data)]
        found = [
            pyrage.x25519.Identity.from_str(line.strip())
            for line in text.splitlines()
            if line.strip().startswith(_AGE_SECRET)
        ]
    except (pyrage.IdentityError, ValueError) as exc:
        raise BackupError(f"--identity {path}: not a usable age or SSH key ({exc})") from exc
    if not found:
        raise BackupError(
            f"--identity {path}: holds no AGE-SECRET-KEY-1… line: give the file age-keygen wrote"
        )
    return found


def decrypt(archive: Path, out: Path, identities: Sequence[Any]) -> None:
    """Writes the plain archive to `out`; BackupError when no identity opens it."""
    try:
        pyrage.decrypt_file(str(archive), str(out), list(identities))
    except pyrage.DecryptError as exc:
        raise BackupError(
            f"{archive.name} does not open with the --identity given ({exc}): give the key of one of "
            "the backup_recipients it was written for"
        ) from exc
    except OSError as exc:
        # The key opened its header, but the contents fail age's authentication.
        raise BackupError(f"{archive.name} is damaged ({exc}): restore from another copy of it") from exc
