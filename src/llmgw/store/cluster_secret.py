"""The cluster's secret: what every replica's engine API key is derived from
(`llmgw.control.decisions.orders.engine_key`).

It must outlive any one server: a restarted server, a follower and a newly elected
leader all derive the same key for a replica, or the engines they adopt would refuse
their router. So it is made once and kept:

- with a store, as one row of `cluster_secrets`, inserted by whichever server needs it
  first (`INSERT ... ON CONFLICT DO NOTHING`, then a read: two servers starting at once
  both read the one row that won), read by every server at start;
- without one, in a file `cluster-secret` beside the admin token's, made 0600 with
  `O_EXCL` so two processes agree on one, and narrowed to 0600 where found readable by
  others.
"""

from __future__ import annotations

import logging
import os
import secrets
import stat
import time
from collections.abc import Callable
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from llmgw.errors import ConfigError
from llmgw.store import schema
from llmgw.store.engine import transaction, upsert

log = logging.getLogger(__name__)

SECRET_BYTES = 32
FILE_NAME = "cluster-secret"
FILE_MODE = 0o600
ENGINE_SECRET = "engine"
"""The row naming the secret engine keys are derived from."""

_SECRETS = schema.cluster_secrets


def new_secret() -> str:
    """256 random bits, as text."""
    return secrets.token_hex(SECRET_BYTES)


async def stored_secret(
    engine: AsyncEngine,
    name: str = ENGINE_SECRET,
    *,
    make: Callable[[], str] = new_secret,
    clock: Callable[[], float] = time.time,
) -> bytes:
    """The store's secret of this name, made first if there is none (first writer wins).
    StoreError when the store cannot be reached."""
    async with transaction(engine) as conn:
        insert = upsert(conn, _SECRETS).values(name=name, secret=make(), created_at=clock())
        await conn.execute(insert.on_conflict_do_nothing(index_elements=["name"]))
        kept = (await conn.execute(sa.select(_SECRETS.c.secret).where(_SECRETS.c.name == name))).scalar_one()
    return str(kept).encode()


def secret_file(admin_token_file: Path) -> Path:
    """Where a server without a store keeps the secret: beside its admin token."""
    return admin_token_file.parent / FILE_NAME


def file_secret(path: Path, *, make: Callable[[], str] = new_secret) -> bytes:
    """The secret in `path`, made first (0600, in a directory made 0700) if absent.
    ConfigError when the file is there but empty."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        except FileExistsError:  # another process made it first: use the one it wrote
            return file_secret(path, make=make)
        with os.fdopen(fd, "w") as handle:
            handle.write(make() + "\n")
        log.info("made the cluster secret at %s", path)
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        os.chmod(path, FILE_MODE)
        log.warning("the cluster secret %s was readable by others (%o); narrowed it to 0600", path, mode)
    secret = path.read_text().strip()
    if not secret:
        raise ConfigError(
            [
                f"the cluster secret file {path} is empty: restore it (engines started with the"
                " old one refuse other keys) or delete it to make a new one"
            ]
        )
    return secret.encode()
