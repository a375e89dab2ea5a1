"""The cluster's secret: what every replica's engine API key is derived from
(`llmgw.control.decisions.orders.engine_key`).

It must outlive any one server: a restarted server, a follower and a newly elected
leader all derive the same key for a replica, or the engines they adopt would refuse
their router. So it is made once and kept:

- with a store, as one row of `cluster_secrets`, inserted by whichever server needs it
  first (`INSERT ... ON CONFLICT DO NOTHING`, then a read: two servers starting at once
  both read the one row that won), read by every server at start; sealed under
  `secrets.master_key` when one is set (`llmgw.secrets.seal`): a row from before
  sealing is sealed in place when read, and `reseal_all` moves every row to a new key;
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

from llmgw.core.private_dirs import private_dir
from llmgw.errors import ConfigError
from llmgw.secrets.seal import Sealer, envelope_key_id, is_sealed, open_value
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


def place(name: str) -> str:
    """Where a secret sits, bound into its seal so it cannot be moved to another row."""
    return f"cluster_secrets/{name}"


async def stored_secret(
    engine: AsyncEngine,
    name: str = ENGINE_SECRET,
    *,
    sealer: Sealer | None = None,
    make: Callable[[], str] = new_secret,
    clock: Callable[[], float] = time.time,
) -> bytes:
    """The store's secret of this name, made first if there is none (first writer wins),
    sealed by `sealer` when given; a plaintext row is sealed in place as it is read.
    StoreError when the store cannot be reached; ConfigError naming secrets.master_key
    when the row is sealed and the key does not open it (or there is no key)."""
    kept = await _read(engine, name)
    if kept is None:  # sealed before the transaction: transit is a call to Vault
        fresh = make()
        written = await sealer.seal(fresh, place(name)) if sealer is not None else fresh
        async with transaction(engine) as conn:
            insert = upsert(conn, _SECRETS).values(name=name, secret=written, created_at=clock())
            await conn.execute(insert.on_conflict_do_nothing(index_elements=["name"]))
        kept = await _read(engine, name)
        assert kept is not None
    if sealer is None:
        if is_sealed(kept):
            raise ConfigError(
                [
                    f"secrets.master_key: the store's secret {place(name)} is sealed (key "
                    f"{envelope_key_id(kept)}) and no master key is set: give the key that sealed it"
                ]
            )
        return kept.encode()
    plaintext, stale = await open_value(sealer, kept, place(name))
    if stale:
        await _replace(engine, name, kept, await sealer.seal(plaintext, place(name)))
        log.info("sealed the store's secret %s under key %s", place(name), sealer.key_id)
    return plaintext.encode()


async def _read(engine: AsyncEngine, name: str) -> str | None:
    async with transaction(engine) as conn:
        found = (await conn.execute(sa.select(_SECRETS.c.secret).where(_SECRETS.c.name == name))).scalar()
    return None if found is None else str(found)


async def check_sealed(engine: AsyncEngine, sealer: Sealer | None) -> int:
    """Opens every stored secret with the configured key (sealing plaintext rows in
    place), so a server whose key does not match its store stops before it listens.
    The number of rows; ConfigError naming secrets.master_key when one does not open."""
    async with transaction(engine) as conn:
        names = [str(n) for n in (await conn.execute(sa.select(_SECRETS.c.name))).scalars()]
    for name in names:
        await stored_secret(engine, name, sealer=sealer)
    return len(names)


async def _replace(engine: AsyncEngine, name: str, old: str, new: str) -> bool:
    """Compare-and-set: another server sealing the same row first wins, harmlessly."""
    async with transaction(engine) as conn:
        done = await conn.execute(
            sa.update(_SECRETS).where(_SECRETS.c.name == name, _SECRETS.c.secret == old).values(secret=new)
        )
    return bool(done.rowcount)


async def reseal_all(engine: AsyncEngine, old: Sealer | None, new: Sealer) -> tuple[int, int]:
    """Seals every stored secret under `new`, opening each with `old` (or as the
    plaintext it is); rows already under `new` are left, so a rotation cut short can be
    run again. (resealed, already under the new key). Nothing is written unless every
    row opens: ConfigError otherwise."""
    async with transaction(engine) as conn:
        rows = [
            (str(n), str(s)) for n, s in (await conn.execute(sa.select(_SECRETS.c.name, _SECRETS.c.secret)))
        ]
    plain: list[tuple[str, str, str]] = []
    done = 0
    for name, stored in rows:
        if is_sealed(stored) and envelope_key_id(stored) == new.key_id:
            await new.open(stored, place(name))  # proves the new key opens it
            done += 1
            continue
        if is_sealed(stored) and old is None:
            raise ConfigError(
                [
                    f"secrets.master_key: the store's secret {place(name)} is sealed: "
                    "give the key that sealed it"
                ]
            )
        value = stored if not is_sealed(stored) or old is None else await old.open(stored, place(name))
        plain.append((name, stored, value))
    for name, stored, value in plain:
        await _replace(engine, name, stored, await new.seal(value, place(name)))
    return len(plain), done


def secret_file(admin_token_file: Path) -> Path:
    """Where a server without a store keeps the secret: beside its admin token."""
    return admin_token_file.parent / FILE_NAME


def file_secret(path: Path, *, make: Callable[[], str] = new_secret) -> bytes:
    """The secret in `path`, made first (0600, in a directory made 0700) if absent.
    ConfigError when the file is there but empty."""
    if not path.exists():
        private_dir(path.parent)
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
