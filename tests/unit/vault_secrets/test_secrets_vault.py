"""The Vault client against the loopback stand-in (tests/support/vault.py): a token file
or AppRole login, the namespace header, KV version 2 reads, Vault's refusals turned into
sentences without values, renewal at half the lease (the sleep injected), and transit
sealing bound to the row."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from llmgw.config import Settings
from llmgw.config.secrets import Vault, resolve_secret
from llmgw.errors import ConfigError
from llmgw.secrets.runtime import external_references, references
from llmgw.secrets.seal import TransitSealer
from llmgw.secrets.vault import Lease, VaultClient, VaultError, renew_wait
from llmgw.server.endpoints_static import static_specs
from support.vault import StandInVault, self_signed, standin_vault


def _approle(vault: StandInVault, tmp_path: Path, **extra: str) -> VaultClient:
    vault.add_approle("role-1", "secret-id-1")
    (tmp_path / "secret-id").write_text("secret-id-1\n")
    settings = Vault(address=vault.url, role_id="role-1", secret_id_file=str(tmp_path / "secret-id"), **extra)
    return VaultClient(settings)


def test_approle_login_in_a_namespace_reads_kv_v2(tmp_path: Path) -> None:
    async def test(vault: StandInVault) -> None:
        vault.put_kv("secret/llmgw/oidc", {"client_secret": " s3cret \n"})
        client = _approle(vault, tmp_path, namespace="team-a")
        try:
            await client.login()
            assert client.lease == Lease(vault.token_ttl_s, True)
            assert await client.read_kv("secret/llmgw/oidc#client_secret") == "s3cret"
            with pytest.raises(VaultError, match="has no field 'other'"):
                await client.read_kv("secret/llmgw/oidc#other")
            with pytest.raises(VaultError, match="404"):
                await client.read_kv("secret/llmgw/absent#x")
        finally:
            await client.close()
        wrong_namespace = _approle(vault, tmp_path, namespace="team-b")
        try:
            with pytest.raises(VaultError, match="404"):
                await wrong_namespace.login()
        finally:
            await wrong_namespace.close()

    with standin_vault(namespace="team-a") as vault:
        asyncio.run(test(vault))


def test_a_bad_token_is_refused_with_the_path_and_never_the_token(tmp_path: Path) -> None:
    async def test(vault: StandInVault) -> None:
        (tmp_path / "token").write_text("hvs.stolen-and-revoked")
        client = VaultClient(Vault(address=vault.url, token_file=str(tmp_path / "token")))
        try:
            with pytest.raises(VaultError) as refused:
                await client.login()
        finally:
            await client.close()
        assert str(refused.value) == "Vault answered 403 to GET /v1/auth/token/lookup-self"

    with standin_vault() as vault:
        asyncio.run(test(vault))


def test_the_token_is_renewed_at_half_its_lease(tmp_path: Path) -> None:
    assert renew_wait(Lease(3600, True)) == 1800
    assert renew_wait(Lease(0, False)) is None, "a root token never expires"
    assert renew_wait(Lease(600, False)) is None, "a token that cannot be renewed is not tried"

    async def test(vault: StandInVault, tmp_path: Path) -> None:
        vault.token_ttl_s = 60
        client = _approle(vault, tmp_path)
        waits: list[float] = []

        async def sleep(seconds: float) -> None:
            waits.append(seconds)
            if len(waits) == 3:
                raise asyncio.CancelledError

        try:
            await client.login()
            with pytest.raises(asyncio.CancelledError):
                await client.renew_loop(sleep=sleep)
        finally:
            await client.close()
        assert waits == [30, 30, 30]
        assert vault.renewals == 2

    with standin_vault() as vault:
        asyncio.run(test(vault, tmp_path))


def test_transit_sealing_is_bound_to_the_row(tmp_path: Path) -> None:
    async def test(vault: StandInVault) -> None:
        vault.make_transit_key("llmgw")
        client = _approle(vault, tmp_path)
        try:
            await client.login()
            sealer = TransitSealer(client, "llmgw")
            sealed = await sealer.seal("engine-secret", "cluster_secrets/engine")
            assert sealed.startswith("sealed:v1:transit/llmgw:vault:v1:")
            assert await sealer.open(sealed, "cluster_secrets/engine") == "engine-secret"
            with pytest.raises(ConfigError, match="altered or moved"):
                await sealer.open(sealed, "cluster_secrets/other")
            with pytest.raises(ConfigError, match="sealed by key transit/llmgw"):
                await TransitSealer(client, "other").open(sealed, "cluster_secrets/engine")
        finally:
            await client.close()

    with standin_vault() as vault:
        asyncio.run(test(vault))


def test_the_one_resolver_takes_vault_values_read_at_start() -> None:
    values = {"vault:secret/a#b": "from-vault"}
    assert resolve_secret("vault:secret/a#b", "auth.scim.token_file", vault=values) == "from-vault"
    with pytest.raises(
        ConfigError, match=re.escape("auth.scim.token_file: 'vault:secret/x#y' was not read from Vault")
    ):
        resolve_secret("vault:secret/x#y", "auth.scim.token_file", vault=values)


def test_every_setting_that_names_a_secret_is_found_for_reading_at_start() -> None:
    settings = Settings.model_validate(
        {
            "auth": {
                "oidc": {
                    "issuer": "https://id.example.com",
                    "client_id": "llmgw",
                    "client_secret_file": "vault:secret/llmgw/oidc#secret",
                    "redirect_url": "https://llmgw.example.com/auth/callback",
                },
                "scim": {"enabled": True, "token_file": "env:SCIM_TOKEN"},
            },
            "notify": {
                "webhooks": [{"url": "https://hooks.example.com/a", "secret_file": "/etc/llmgw/hook"}]
            },
            "secrets": {
                "master_key": "env:SEAL_KEY",
                "vault": {
                    "address": "https://vault.example.com:8200",
                    "token_file": "/etc/llmgw/vault-token",
                },
            },
        }
    )
    assert dict(references(settings)) == {
        "auth.oidc.client_secret_file": "vault:secret/llmgw/oidc#secret",
        "auth.scim.token_file": "env:SCIM_TOKEN",
        "notify.webhooks[0].secret_file": "/etc/llmgw/hook",
        "secrets.master_key": "env:SEAL_KEY",
    }


def test_external_provider_keys_go_through_the_one_resolver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROVIDER_KEY", "sk-from-env")
    settings = Settings.model_validate(
        {
            "endpoints": [{"id": "e", "url": "http://127.0.0.1:9", "models": ["local"]}],
            "models": [
                {
                    "name": "ext",
                    "source": "external",
                    "external": {
                        "url": "https://api.example.com/v1",
                        "model": "m",
                        "api_key_files": [{"file": "env:PROVIDER_KEY"}, {"file": "vault:secret/p#key"}],
                    },
                }
            ],
        }
    )
    assert dict(external_references(settings)) == {
        "models[ext].external.api_key_files[0].file": "env:PROVIDER_KEY",
        "models[ext].external.api_key_files[1].file": "vault:secret/p#key",
    }
    specs = static_specs(settings, {"vault:secret/p#key": "sk-from-vault"})
    assert [s.api_key for s in specs if s.external] == ["sk-from-env", "sk-from-vault"]


def test_a_ca_file_that_cannot_be_loaded_is_named(tmp_path: Path) -> None:
    (tmp_path / "not-a-ca.pem").write_text("not a certificate")
    for name, reason in (("absent.pem", "No such file"), ("not-a-ca.pem", "NO_CERTIFICATE_OR_CRL_FOUND")):
        settings = Vault(address="https://127.0.0.1:8200", ca_file=name, token_file="env:VAULT_TOKEN")
        with pytest.raises(
            ConfigError, match=f"secrets.vault.ca_file: cannot load {tmp_path / name} \\({reason}"
        ):
            VaultClient(settings, base_dir=tmp_path)


def test_vault_over_tls_is_trusted_through_ca_file_only(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)

    async def read(vault: StandInVault, ca_file: str) -> str:
        (tmp_path / "token").write_text(vault.root_token)
        settings = Vault(address=vault.url, ca_file=ca_file, token_file=str(tmp_path / "token"))
        client = VaultClient(settings)
        try:
            await client.login()
            return await client.read_kv("secret/tls#value")
        finally:
            await client.close()

    with standin_vault(tls=(cert, key)) as vault:
        vault.put_kv("secret/tls", {"value": "over-tls"})
        assert vault.url.startswith("https://")
        assert asyncio.run(read(vault, str(cert))) == "over-tls"
        with pytest.raises(VaultError, match=r"could not be reached .*Certificate"):
            asyncio.run(read(vault, ""))
