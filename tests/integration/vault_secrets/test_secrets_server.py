"""Secrets end to end: `llmgw server` with secrets from an environment variable, a file
and Vault (the loopback stand-in, or a real Vault when VAULT_ADDR and VAULT_TOKEN are
set), the store's cluster secret sealed under `secrets.master_key`, rotated with
`llmgw server rotate-master-key`, and no secret value in any output of the run.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from llmgw.testing.server import GatewayProcess, free_port, start_gateway
from support.vault import RealVault, StandInVault, standin_vault

SCIM_TOKEN = "scim-" + secrets.token_hex(16)
WEBHOOK_SECRET = "whsec-" + secrets.token_hex(16)
PROVIDER_VAULT_KEY = "sk-vault-" + secrets.token_hex(16)
PROVIDER_ENV_KEY = "sk-env-" + secrets.token_hex(16)
OLD_KEY = secrets.token_hex(32)
NEW_KEY = secrets.token_hex(32)
SCIM_JSON = "application/scim+json"
USER = "urn:ietf:params:scim:schemas:core:2.0:User"

Vaultish = StandInVault | RealVault


@pytest.fixture(params=["stand-in", "real"])
def vault(request: pytest.FixtureRequest) -> Iterator[Vaultish]:
    if request.param == "real":
        if not (os.environ.get("VAULT_ADDR") and os.environ.get("VAULT_TOKEN")):
            pytest.skip("no real Vault: set VAULT_ADDR and VAULT_TOKEN (a dev server will do) to run this")
        if len(os.environ["VAULT_TOKEN"]) < 16:
            pytest.skip(
                "VAULT_TOKEN is too short to look for in every output: give one of 16 characters or more"
            )
        yield RealVault(os.environ["VAULT_ADDR"], os.environ["VAULT_TOKEN"])
        return
    with standin_vault() as standin:
        yield standin


def _config(where: Path, vault: Vaultish, token_file: Path, master_key: str) -> dict[str, Any]:
    return {
        "agent_insecure": True,
        "agent_listen": f"127.0.0.1:{free_port()}",
        "auth": {
            "enabled": True,
            "store": str(where / "llmgw.db"),
            "scim": {"enabled": True, "token_file": "vault:secret/llmgw/scim#token"},
        },
        "notify": {
            "webhooks": [{"url": "http://127.0.0.1:9/hook", "secret_file": str(where / "webhook-secret")}]
        },
        "models": [
            {
                "name": "ext-vault",
                "source": "external",
                "external": {
                    "url": "http://127.0.0.1:9/v1",
                    "model": "m",
                    "api_key_file": "vault:secret/llmgw/provider#key",
                },
            },
            {
                "name": "ext-env",
                "source": "external",
                "external": {
                    "url": "http://127.0.0.1:9/v1",
                    "model": "m",
                    "api_key_file": "env:PROVIDER_KEY",
                },
            },
        ],
        "secrets": {"vault": {"address": vault.url, "token_file": str(token_file)}, "master_key": master_key},
    }


def _llmgw(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "llmgw", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


@contextlib.contextmanager
def _server(config: dict[str, Any], env: dict[str, str]) -> Iterator[GatewayProcess]:
    gateway = start_gateway(config, env=env)
    try:
        yield gateway
    finally:
        gateway.stop()


def _sealed_row(store: Path) -> str:
    with contextlib.closing(sqlite3.connect(store)) as db:
        return str(db.execute("SELECT secret FROM cluster_secrets WHERE name = 'engine'").fetchone()[0])


def test_secrets_from_env_file_and_vault_never_shown_and_sealed(vault: Vaultish, tmp_path: Path) -> None:
    vault.put_kv("secret/llmgw/scim", {"token": SCIM_TOKEN})
    vault.put_kv("secret/llmgw/provider", {"key": PROVIDER_VAULT_KEY})
    token_file = tmp_path / "vault-token"
    token_file.write_text(vault.root_token + "\n")
    env = {**os.environ, "SEAL_KEY": OLD_KEY, "NEW_SEAL_KEY": NEW_KEY, "PROVIDER_KEY": PROVIDER_ENV_KEY}
    config = _config(tmp_path, vault, token_file, "env:SEAL_KEY")
    (tmp_path / "webhook-secret").write_text(WEBHOOK_SECRET)
    outputs: list[str] = []
    store = tmp_path / "llmgw.db"
    with _server(config, env) as gateway:
        headers = {"Authorization": f"Bearer {SCIM_TOKEN}", "Content-Type": SCIM_JSON}
        made = httpx.post(
            gateway.url + "/scim/v2/Users",
            json={"schemas": [USER], "userName": "ada@example.com", "active": True},
            headers=headers,
            timeout=10,
        )
        assert made.status_code == 201, made.text  # the token read from Vault is the one in force
        refused = httpx.get(
            gateway.url + "/scim/v2/Users", headers={"Authorization": "Bearer wrong"}, timeout=10
        )
        assert refused.status_code == 401
        admin = {"Authorization": f"Bearer {gateway.admin_token()}"}
        outputs += [
            httpx.get(gateway.admin_url + "/metrics", timeout=10).text,
            httpx.get(gateway.admin_url + "/api/settings/inert", headers=admin, timeout=10).text,
            httpx.get(gateway.admin_url + "/api/router/replicas", headers=admin, timeout=10).text,
            httpx.get(gateway.admin_url + "/api/control/models", headers=admin, timeout=10).text,
            made.text,
            refused.text,
        ]
        shown = _llmgw("config", "show", str(gateway.config_path), env=env)
        assert shown.returncode == 0, shown.stderr
        outputs += [shown.stdout, shown.stderr]
        config_path = gateway.config_path
    outputs.append(gateway.log())
    sealed = _sealed_row(store)
    assert sealed.startswith("sealed:v1:"), "the cluster secret is kept sealed"
    outputs.append(sealed)

    # Rotation: every row sealed again under the new key; the old key then opens nothing.
    rotated = _llmgw(
        "server", "rotate-master-key", "--config", str(config_path), "--new-key", "env:NEW_SEAL_KEY", env=env
    )
    assert rotated.returncode == 0, rotated.stderr
    assert "sealed 1 secret(s)" in rotated.stdout
    outputs += [rotated.stdout, rotated.stderr]
    assert _sealed_row(store) != sealed
    with pytest.raises(RuntimeError) as refused_start:
        start_gateway(config, env=env)
    assert "secrets.master_key" in str(refused_start.value)
    outputs.append(str(refused_start.value))
    config["secrets"]["master_key"] = "env:NEW_SEAL_KEY"
    with _server(config, env) as gateway:
        assert httpx.get(gateway.admin_url + "/readyz", timeout=10).status_code == 200
    outputs.append(gateway.log())

    everything = "\n".join(outputs)
    assert "ext-vault" in everything, "the outputs gathered do describe the external models"
    for value in (
        SCIM_TOKEN,
        WEBHOOK_SECRET,
        PROVIDER_VAULT_KEY,
        PROVIDER_ENV_KEY,
        OLD_KEY,
        NEW_KEY,
        vault.root_token,
    ):
        assert value not in everything


def test_a_secret_vault_cannot_give_stops_the_start_naming_setting_and_reference(
    vault: Vaultish, tmp_path: Path
) -> None:
    token_file = tmp_path / "vault-token"
    token_file.write_text(vault.root_token)
    config = _config(tmp_path, vault, token_file, "")
    config["auth"]["scim"]["token_file"] = "vault:secret/llmgw/absent#token"
    config["notify"] = {}
    config["models"] = []
    with pytest.raises(RuntimeError) as refused:
        start_gateway(config)
    message = str(refused.value)
    assert "auth.scim.token_file: 'vault:secret/llmgw/absent#token' could not be read from Vault" in message
    assert "Traceback" not in message
    assert vault.root_token not in message


def test_a_token_vault_refuses_stops_the_start(vault: Vaultish, tmp_path: Path) -> None:
    token_file = tmp_path / "vault-token"
    token_file.write_text("hvs.not-a-token")
    config = _config(tmp_path, vault, token_file, "")
    config["notify"] = {}
    config["models"] = []
    with pytest.raises(RuntimeError) as refused:
        start_gateway(config)
    message = str(refused.value)
    assert "secrets.vault.token_file: Vault at" in message
    assert "403" in message
    assert "Traceback" not in message
    assert "hvs.not-a-token" not in message


def test_a_store_copied_without_its_key_opens_nothing(vault: Vaultish, tmp_path: Path) -> None:
    vault.put_kv("secret/llmgw/scim", {"token": SCIM_TOKEN})
    token_file = tmp_path / "vault-token"
    token_file.write_text(vault.root_token)
    config = _config(tmp_path, vault, token_file, "env:SEAL_KEY")
    config["notify"] = {}
    config["models"] = []
    with _server(config, {**os.environ, "SEAL_KEY": OLD_KEY}):
        pass
    for env in ({**os.environ, "SEAL_KEY": NEW_KEY}, {**os.environ}):
        if "SEAL_KEY" not in env:
            config["secrets"]["master_key"] = ""
        with pytest.raises(RuntimeError) as refused:
            start_gateway(config, env=env)
        message = str(refused.value)
        assert "secrets.master_key: the store's secret cluster_secrets/engine" in message
        assert "Traceback" not in message


@pytest.mark.parametrize(
    ("new_key", "says"),
    [
        ("env:NO_SUCH_KEY", "--new-key: environment variable NO_SUCH_KEY is unset or empty"),
        ("env:SHORT_KEY", "secrets.master_key: the key it names is not 64 hex digits"),
        (
            "vault-transit:llmgw",
            "--new-key 'vault-transit:llmgw' seals with Vault, but secrets.vault.address is empty",
        ),
    ],
)
def test_rotate_master_key_refuses_a_new_key_it_cannot_use_in_one_sentence(
    new_key: str, says: str, tmp_path: Path
) -> None:
    config = tmp_path / "llmgw.yaml"
    config.write_text(
        yaml.safe_dump(
            {"auth": {"enabled": True, "store": str(tmp_path / "llmgw.db")}, "agent_insecure": True}
        )
    )
    env = {**os.environ, "SHORT_KEY": "abc123"}
    refused = _llmgw("server", "rotate-master-key", "--config", str(config), "--new-key", new_key, env=env)
    assert refused.returncode == 2, refused.stdout
    assert says in refused.stderr
    assert "Traceback" not in refused.stderr
    assert "abc123" not in refused.stderr


def test_a_running_server_logs_in_with_approle_and_keeps_its_token_renewed(tmp_path: Path) -> None:
    # The stand-in only: seeding AppRole in a real Vault needs its admin, which these tests do not assume.
    with standin_vault(namespace="team-a") as vault:
        vault.token_ttl_s = 2  # renewed at half of that
        vault.put_kv("secret/llmgw/scim", {"token": SCIM_TOKEN})
        vault.add_approle("llmgw-role", "llmgw-secret-id")
        (tmp_path / "secret-id").write_text("llmgw-secret-id\n")
        config = _config(tmp_path, vault, tmp_path / "unused", "")
        config["notify"] = {}
        config["models"] = []
        config["secrets"]["vault"] = {
            "address": vault.url,
            "namespace": "team-a",
            "role_id": "llmgw-role",
            "secret_id_file": str(tmp_path / "secret-id"),
        }
        with _server(config, dict(os.environ)) as gateway:
            assert vault.logins == 1
            for _ in range(200):  # bounded: the first renewal is due a second after the start
                if vault.renewals >= 2:
                    break
                assert gateway.process.poll() is None, gateway.log()
                _pause()
            assert vault.renewals >= 2, gateway.log()
            answer = httpx.get(
                gateway.url + "/scim/v2/Users", headers={"Authorization": f"Bearer {SCIM_TOKEN}"}, timeout=10
            )
            assert answer.status_code == 200, answer.text


def _pause() -> None:
    threading.Event().wait(0.1)


def test_sealing_in_vault_transit_and_rotating_out_of_it(vault: Vaultish, tmp_path: Path) -> None:
    vault.put_kv("secret/llmgw/scim", {"token": SCIM_TOKEN})
    vault.make_transit_key("llmgw")
    token_file = tmp_path / "vault-token"
    token_file.write_text(vault.root_token)
    config = _config(tmp_path, vault, token_file, "vault-transit:llmgw")
    config["notify"] = {}
    config["models"] = []
    env = {**os.environ, "NEW_SEAL_KEY": NEW_KEY}
    with _server(config, env):
        pass
    store = tmp_path / "llmgw.db"
    assert _sealed_row(store).startswith("sealed:v1:transit/llmgw:vault:v1:")
    with _server(config, env):
        pass  # a restart opens it through Vault
    config_path = tmp_path / "llmgw.yaml"
    config_path.write_text(yaml.safe_dump(config))
    rotated = _llmgw(
        "server", "rotate-master-key", "--config", str(config_path), "--new-key", "env:NEW_SEAL_KEY", env=env
    )
    assert rotated.returncode == 0, rotated.stderr
    assert _sealed_row(store).startswith("sealed:v1:")
    assert not _sealed_row(store).startswith("sealed:v1:transit/")
    config["secrets"]["master_key"] = "env:NEW_SEAL_KEY"
    with _server(config, env) as gateway:
        assert httpx.get(gateway.admin_url + "/readyz", timeout=10).status_code == 200
