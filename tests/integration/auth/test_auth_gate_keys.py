"""Authentication at the seam: keys found in memory, a new key looked up once, a bad key
remembered, expiry, revocation within cache_ttl, and what a key may see."""

from __future__ import annotations

import asyncio
import time

import pytest
from auth_store_helpers import Clock, make_key, make_tree, opened, started_gate

from llmgw.errors import Unauthorized

NOW = 1_800_000_000.0


def run(coro: object) -> None:
    asyncio.run(coro)  # type: ignore[arg-type]


def test_keys_authenticate_without_store_reads(store_location: str) -> None:
    async def scenario() -> None:
        async with opened(store_location) as store:
            await make_tree(store)
            project_key = await make_key(store, NOW)
            personal_key = await make_key(store, NOW, user_id="u")
        async with started_gate(store_location, Clock(NOW)) as gate:
            p = await gate.authenticate(f"Bearer {project_key}", NOW)
            assert (p.kind, p.project_id, p.team_id, p.org_id) == ("project", "p", "t", "o")
            q = await gate.authenticate(f"Bearer {personal_key}", NOW)
            assert (q.kind, q.user_id) == ("personal", "u")
            assert gate.store_reads == 0

    run(scenario())


@pytest.mark.parametrize(
    ("header", "code"),
    [(None, "missing_api_key"), ("Basic x", "missing_api_key"), ("Bearer sk-not-ours", "invalid_api_key")],
)
def test_missing_or_malformed_keys_are_401(store_location: str, header: str | None, code: str) -> None:
    async def scenario() -> None:
        async with started_gate(store_location, Clock(NOW)) as gate:
            with pytest.raises(Unauthorized) as refused:
                await gate.authenticate(header, NOW)
            assert refused.value.status == 401
            assert refused.value.code == code
            assert gate.store_reads == 0

    run(scenario())


def test_a_key_made_elsewhere_is_read_once_and_a_bad_one_remembered(store_location: str) -> None:
    async def scenario() -> None:
        async with opened(store_location) as store:
            await make_tree(store)
        async with started_gate(store_location, Clock(NOW), negative_ttl=30, cache_ttl=600) as gate:
            async with opened(store_location) as other:  # another gateway's admin API
                fresh = await make_key(other, NOW)
            await gate.authenticate(f"Bearer {fresh}", NOW)
            await gate.authenticate(f"Bearer {fresh}", NOW)
            assert gate.store_reads == 1
            bad = fresh[:-4] + "AAAA"
            for _ in range(5):
                with pytest.raises(Unauthorized):
                    await gate.authenticate(f"Bearer {bad}", NOW + 1)
            assert gate.store_reads == 2
            with pytest.raises(Unauthorized):
                await gate.authenticate(f"Bearer {bad}", NOW + 32)  # remembered for negative_ttl only
            assert gate.store_reads == 3

    run(scenario())


def test_an_expired_key_is_refused_at_its_expiry(store_location: str) -> None:
    async def scenario() -> None:
        async with opened(store_location) as store:
            await make_tree(store)
            key = await make_key(store, NOW, expires_at=NOW + 10)
        async with started_gate(store_location, Clock(NOW)) as gate:
            await gate.authenticate(f"Bearer {key}", NOW + 9.9)
            with pytest.raises(Unauthorized):
                await gate.authenticate(f"Bearer {key}", NOW + 10)

    run(scenario())


def test_revocation_elsewhere_takes_effect_within_cache_ttl(store_location: str) -> None:
    cache_ttl = 0.5

    async def scenario() -> None:
        async with opened(store_location) as store:
            await make_tree(store)
            key = await make_key(store, time.time())
        async with started_gate(store_location, cache_ttl=cache_ttl) as gate, opened(store_location) as other:
            await gate.authenticate(f"Bearer {key}", time.time())
            key_id = key.split("-")[1]
            await other.keys.revoke(key_id, time.time())
            revoked = time.monotonic()
            while True:
                try:
                    await gate.authenticate(f"Bearer {key}", time.time())
                except Unauthorized:
                    break
                assert time.monotonic() - revoked < cache_ttl + 0.5, "the revoked key still works"
                await asyncio.sleep(0.01)
            assert time.monotonic() - revoked <= cache_ttl + 0.25

    run(scenario())


def test_models_and_adapters_visible_to_a_key(store_location: str) -> None:
    async def scenario() -> None:
        async with opened(store_location) as store:
            await make_tree(
                store, org={"allowed_models": ("m1", "m2")}, project={"allowed_models": ("m2", "m3")}
            )
            key = await make_key(store, NOW)
        async with started_gate(store_location, Clock(NOW)) as gate:
            p = await gate.authenticate(f"Bearer {key}", NOW)
            assert [gate.visible(p, m, None) for m in ("m1", "m2", "m3")] == [False, True, False]
            assert gate.visible(p, "m2", "team:t")
            assert gate.visible(p, "m2", "project:p")
            assert not gate.visible(p, "m2", "team:other")
            assert not gate.visible(p, "m2", "user:u")

    run(scenario())


def test_known_answers_for_a_key_already_used_until_it_expires_or_is_revoked(store_location: str) -> None:
    async def scenario() -> None:
        async with opened(store_location) as store:
            await make_tree(store)
            expiring = await make_key(store, NOW, expires_at=NOW + 10)
            revoked = await make_key(store, NOW)
        async with started_gate(store_location, Clock(NOW)) as gate:
            first, second = f"Bearer {expiring}", f"Bearer {revoked}"
            # Loaded at start, but never used here: `authenticate` decides.
            assert gate.known(first, NOW) is None
            assert gate.known(None, NOW) is None
            p = await gate.authenticate(first, NOW)
            assert gate.known(first, NOW + 9.9) is p
            assert gate.known(first, NOW + 10) is None
            q = await gate.authenticate(second, NOW)
            assert gate.known(second, NOW) is q
            async with opened(store_location) as store:  # revoked through this gateway's admin API
                row = await store.keys.revoke(revoked.split("-")[1], NOW)
            gate.key_changed(row)
            assert gate.known(second, NOW) is None
            with pytest.raises(Unauthorized):
                await gate.authenticate(second, NOW)
            assert gate.known(first, NOW) is p, "another key is not forgotten with it"

    run(scenario())
