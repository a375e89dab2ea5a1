"""Sealing the store's secrets: AES-256-GCM envelopes named by key id and bound to their
row, plaintext rows sealed in place when read, rotation to a new key, and a store
opened with the wrong key (or none) refused with a sentence naming secrets.master_key,
over a real SQLite store."""

from __future__ import annotations

import asyncio
import secrets
import sqlite3
from pathlib import Path

import pytest

from llmgw.errors import ConfigError
from llmgw.secrets.seal import KeySealer, is_sealed, key_id, open_value, parse_key
from llmgw.store import Store
from llmgw.store.cluster_secret import check_sealed, reseal_all, stored_secret

OLD = KeySealer(secrets.token_bytes(32))
NEW = KeySealer(secrets.token_bytes(32))


def test_a_sealed_value_opens_only_with_its_key_and_in_its_row() -> None:
    async def test() -> None:
        sealed = await OLD.seal("the-secret", "cluster_secrets/engine")
        assert is_sealed(sealed)
        assert sealed.startswith(f"sealed:v1:{OLD.key_id}:")
        assert "the-secret" not in sealed
        assert await OLD.open(sealed, "cluster_secrets/engine") == "the-secret"
        with pytest.raises(
            ConfigError, match=f"sealed by key {OLD.key_id}, but the configured key is {NEW.key_id}"
        ):
            await NEW.open(sealed, "cluster_secrets/engine")
        with pytest.raises(ConfigError, match="altered or moved"):
            await OLD.open(sealed, "cluster_secrets/other")
        tampered = sealed[:-4] + ("AAAA" if not sealed.endswith("AAAA") else "BBBB")
        with pytest.raises(ConfigError, match="altered or moved"):
            await OLD.open(tampered, "cluster_secrets/engine")
        assert await open_value(OLD, "plain", "cluster_secrets/engine") == ("plain", True)
        assert await open_value(OLD, sealed, "cluster_secrets/engine") == ("the-secret", False)

    asyncio.run(test())


def test_a_key_is_64_hex_digits_and_the_refusal_does_not_repeat_it() -> None:
    key = secrets.token_hex(32)
    assert parse_key(key + "\n") == bytes.fromhex(key)
    assert key_id(bytes.fromhex(key)) == KeySealer(bytes.fromhex(key)).key_id
    with pytest.raises(ConfigError) as refused:
        parse_key("not-a-key-but-a-password")
    assert "secrets.master_key" in str(refused.value)
    assert "not-a-key-but-a-password" not in str(refused.value)


def _row(path: Path) -> str:
    with sqlite3.connect(path) as db:
        return str(db.execute("SELECT secret FROM cluster_secrets WHERE name = 'engine'").fetchone()[0])


def test_plaintext_rows_are_sealed_when_read_and_rotation_moves_them_to_a_new_key(tmp_path: Path) -> None:
    path = tmp_path / "store.db"

    async def test() -> None:
        store = await Store.open(str(path))
        try:
            plain = await stored_secret(store.engine, make=lambda: "before-sealing")
            assert _row(path) == "before-sealing"
            assert await stored_secret(store.engine, sealer=OLD) == plain
            sealed = _row(path)
            assert sealed.startswith(f"sealed:v1:{OLD.key_id}:"), "sealed in place on the first read"
            assert await check_sealed(store.engine, OLD) == 1

            assert await reseal_all(store.engine, OLD, NEW) == (1, 0)
            assert _row(path).startswith(f"sealed:v1:{NEW.key_id}:")
            assert await reseal_all(store.engine, OLD, NEW) == (0, 1), "a second run finds it done"
            assert await stored_secret(store.engine, sealer=NEW) == plain

            with pytest.raises(
                ConfigError, match=r"secrets\.master_key: the store's secret cluster_secrets/engine"
            ):
                await check_sealed(store.engine, OLD)
            with pytest.raises(ConfigError, match="no master key is set"):
                await stored_secret(store.engine)
        finally:
            await store.close()

    asyncio.run(test())


def test_rotation_writes_nothing_when_a_row_does_not_open(tmp_path: Path) -> None:
    path = tmp_path / "store.db"

    async def test() -> None:
        store = await Store.open(str(path))
        try:
            await stored_secret(store.engine, sealer=OLD)
            before = _row(path)
            third = KeySealer(secrets.token_bytes(32))
            with pytest.raises(ConfigError, match="sealed by key"):
                await reseal_all(store.engine, third, NEW)
            assert _row(path) == before
        finally:
            await store.close()

    asyncio.run(test())
