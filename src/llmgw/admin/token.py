"""The admin token: the bearer credential of the admin API (`/api`), kept in a file
only its owner can read.

Made at first start when the file is absent (256 random bits, mode 0600, in a
directory created 0700); a file found readable by others is narrowed to 0600 rather
than trusted as it is, since the token grants everything the admin API does.
"""

from __future__ import annotations

import hmac
import logging
import os
import secrets
import stat
from pathlib import Path

from llmgw.core.private_dirs import private_dir

log = logging.getLogger(__name__)

TOKEN_BYTES = 32
FILE_MODE = 0o600


def load_or_create(path: Path) -> str:
    """The token in `path`, made first if there is none."""
    if not path.exists():
        private_dir(path.parent)
        token = secrets.token_urlsafe(TOKEN_BYTES)
        # O_EXCL: two processes starting at once agree on one token (the loser reads it).
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        except FileExistsError:
            return load_or_create(path)
        with os.fdopen(fd, "w") as handle:
            handle.write(token + "\n")
        log.info("made the admin token at %s", path)
        return token
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        os.chmod(path, FILE_MODE)
        log.warning("the admin token file %s was readable by others (%o); narrowed it to 0600", path, mode)
    token = path.read_text().strip()
    if not token:
        raise ValueError(f"the admin token file {path} is empty: delete it and a new token is made at start")
    return token


def read(path: Path) -> str:
    """The token in an existing file, for the command line."""
    return path.read_text().strip()


def matches(expected: str, authorization_header: str | None) -> bool:
    """Whether the header is `Bearer <expected>`, compared in constant time."""
    if not authorization_header:
        return False
    scheme, _, given = authorization_header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode(), expected.encode())
