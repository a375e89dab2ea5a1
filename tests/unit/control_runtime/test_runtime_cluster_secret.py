"""The cluster's secret, which engine keys are derived from: one row in a real SQLite
store made by the first server that asks and read by every later one; without a store,
a file beside the admin token, made 0600 once and kept; and the key each replica's
engine demands, the same on every server that has the secret."""

from __future__ import annotations

import asyncio
import itertools
import stat
from pathlib import Path

import pytest

from llmgw.config import Settings
from llmgw.control.decisions.orders import engine_key
from llmgw.errors import ConfigError
from llmgw.server.control import engine_secret
from llmgw.store import Store
from llmgw.store.cluster_secret import file_secret, secret_file, stored_secret


def test_the_first_server_to_ask_makes_the_stores_secret_and_every_other_reads_it(tmp_path: Path) -> None:
    async def test() -> None:
        store = await Store.open(str(tmp_path / "store.db"))
        try:
            made = (f"secret-{i}" for i in itertools.count())
            first = await stored_secret(store.engine, make=lambda: next(made))
            again = await asyncio.gather(
                *(stored_secret(store.engine, make=lambda: next(made)) for _ in range(3))
            )
            assert first == b"secret-0"
            assert again == [first] * 3
            assert await stored_secret(store.engine, "other", make=lambda: "x") == b"x", "one row per name"
            assert await engine_secret(Settings(), store, None) == first
        finally:
            await store.close()

    asyncio.run(test())


def test_without_a_store_the_secret_is_a_private_file_beside_the_admin_token(tmp_path: Path) -> None:
    settings = Settings(admin_token_file=str(tmp_path / "keys" / "admin-token"))
    path = secret_file(Path(settings.admin_token_file))
    assert path == tmp_path / "keys" / "cluster-secret"

    made = asyncio.run(engine_secret(settings, None, None))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert len(made) == 64
    assert asyncio.run(engine_secret(settings, None, None)) == made, "a restarted server reads the same"

    path.chmod(0o644)
    assert file_secret(path) == made
    assert stat.S_IMODE(path.stat().st_mode) == 0o600, "narrowed rather than trusted"


def test_the_default_place_is_beside_the_configurations_admin_token(tmp_path: Path) -> None:
    made = asyncio.run(engine_secret(Settings(), None, tmp_path))
    assert (tmp_path / "secrets" / "cluster-secret").read_text().strip().encode() == made


def test_an_empty_secret_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "cluster-secret"
    path.write_text("\n")
    with pytest.raises(ConfigError, match="empty"):
        file_secret(path)


def test_every_replica_has_its_own_key_and_every_server_derives_the_same() -> None:
    assert engine_key(b"s", "r1") == engine_key(b"s", "r1")
    assert engine_key(b"s", "r1") != engine_key(b"s", "r2")
    assert engine_key(b"s", "r1") != engine_key(b"t", "r1")
    assert engine_key(b"", "r1") == "", "no secret, no key"
