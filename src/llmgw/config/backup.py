"""What `llmgw server backup` writes, who can read it, where copies go and when the
server runs it: the settings' shapes, checked here; `llmgw.backup` acts on them.

Archives contain the cluster CA's private key and all stored secrets. Encrypting them
for `backup_recipients` (keys in the forms `age` accepts) makes off-machine copies
harmless, which is why `backup_copy_to` is only accepted together with recipients.
"""

from __future__ import annotations

import base64
import binascii
import re
import struct
from dataclasses import dataclass
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator

DEFAULT_BACKUP_DIR = "/var/backups/llmgw-server"
KNOWN_HOSTS_FILE = "backup_known_hosts"
"""Beside the configuration (/etc/llmgw/backup_known_hosts for /etc/llmgw/llmgw.yaml):
the SSH host keys of `backup_copy_to` hosts, each learnt the first time it is reached."""
_TIME_OF_DAY = re.compile(r"^([01][0-9]|2[0-3]):([0-5][0-9])$")
SSH_KEY_TYPES: tuple[str, ...] = ("ssh-ed25519", "ssh-rsa")

# An age recipient is bech32: "age1", then 52 characters of key and 6 of checksum, in an
# alphabet without 1, b, i and o. The checksum catches a character lost in copying.
_BECH32 = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
_AGE_RECIPIENT = re.compile(rf"^age1[{_BECH32}]{{58}}$")
_BECH32_GENERATORS = (0x3B6A57B2, 0x26508E6D, 0x1EA119FA, 0x3D4233DD, 0x2A1462B3)


def _bech32_checksum_holds(hrp: str, data: str) -> bool:
    values = [ord(c) >> 5 for c in hrp] + [0] + [ord(c) & 31 for c in hrp] + [_BECH32.index(c) for c in data]
    check = 1
    for value in values:
        top = check >> 25
        check = (check & 0x1FFFFFF) << 5 ^ value
        for i, generator in enumerate(_BECH32_GENERATORS):
            if (top >> i) & 1:
                check ^= generator
    return check == 1


@dataclass(frozen=True)
class BackupRecipient:
    """One key an archive is encrypted to."""

    kind: str
    """age, ssh-ed25519 or ssh-rsa."""
    key: str
    """The recipient as `age -r` takes it (an SSH key without its comment)."""


def parse_backup_recipient(text: str) -> BackupRecipient:
    """Reads `age1…` or `ssh-ed25519 AAAA… comment`; raises ValueError saying which forms
    are taken."""
    text = text.strip()
    if text.startswith("age1"):
        if not _AGE_RECIPIENT.match(text) or not _bech32_checksum_holds("age", text.removeprefix("age1")):
            raise ValueError(
                f"{text!r} is not a whole age recipient: copy the age1… line `age-keygen -y` prints"
            )
        return BackupRecipient("age", text)
    parts = text.split()
    if len(parts) >= 2 and parts[0] in SSH_KEY_TYPES:
        kind, blob = parts[0], parts[1]
        if _ssh_blob_type(blob) != kind:
            raise ValueError(
                f"the {kind} key {blob[:16]}… is damaged: copy the whole line from the .pub file"
            )
        return BackupRecipient(kind, f"{kind} {blob}")
    shown = text if len(text) <= 40 else text[:40] + "…"
    raise ValueError(
        f"{shown!r} is neither an age recipient (age1…) nor an SSH public key (ssh-ed25519 … or ssh-rsa …)"
    )


def _ssh_blob_type(blob: str) -> str | None:
    """The key type an SSH public key's base64 body names inside itself."""
    try:
        raw = base64.b64decode(blob, validate=True)
        (length,) = struct.unpack(">I", raw[:4])
        return raw[4 : 4 + length].decode("ascii")
    except (binascii.Error, struct.error, UnicodeDecodeError, ValueError):
        return None


def parse_backup_recipients(texts: tuple[str, ...] | list[str]) -> tuple[BackupRecipient, ...]:
    return tuple(parse_backup_recipient(text) for text in texts)


def _recipient_text(text: str) -> str:
    parse_backup_recipient(text)
    return text


BackupRecipientText = Annotated[str, AfterValidator(_recipient_text)]


@dataclass(frozen=True)
class CopyTarget:
    """Where an archive is copied: a directory, or a path on a host over SSH."""

    kind: str
    """dir or ssh."""
    path: str
    user: str = ""
    host: str = ""
    port: int = 22


def parse_copy_target(text: str) -> CopyTarget:
    """Reads `/mnt/share/llmgw` or `ssh://user@host[:port]/path`."""
    if text.startswith("ssh://"):
        try:
            parts = urlsplit(text)
            port = parts.port or 22
        except ValueError:
            parts, port = None, 0
        if parts is None or not parts.username or not parts.hostname or parts.path in ("", "/"):
            raise ValueError(f"{text!r}: an SSH copy is ssh://user@host[:port]/path, with a user and a path")
        return CopyTarget("ssh", parts.path, parts.username, parts.hostname, port)
    if not text.startswith("/"):
        raise ValueError(f"{text!r}: give an absolute path (/mnt/backups) or ssh://user@host[:port]/path")
    return CopyTarget("dir", text)


def _copy_target_text(text: str) -> str:
    parse_copy_target(text)
    return text


CopyTargetText = Annotated[str, AfterValidator(_copy_target_text)]


def parse_time_of_day(text: str) -> tuple[int, int] | None:
    """`HH:MM` (UTC) as (hour, minute); None for empty (no schedule)."""
    if not text:
        return None
    found = _TIME_OF_DAY.match(text)
    if found is None:
        raise ValueError(f'{text!r} is not a time of day: give HH:MM in UTC, like "03:00", or "" for none')
    return int(found.group(1)), int(found.group(2))


def _time_of_day_text(text: str) -> str:
    parse_time_of_day(text)
    return text


TimeOfDayText = Annotated[str, AfterValidator(_time_of_day_text)]
