"""Fixtures for the settings tests: one valid configuration that sets something in every
section, and helpers that change one thing in it and load it.

Every rule test starts from `valid` and changes exactly one value, so a failure points
at that value. Nothing here reads the process environment: each load is handed the
environment it should see, and an autouse fixture strips LLMGW_ variables besides.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from llmgw.config import Settings, settings_from_mapping
from llmgw.errors import ConfigError

Document = dict[str, Any]

AGE_RECIPIENT = "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p"
# An ssh-ed25519 public key body: the type name and 32 key bytes, length-prefixed.
SSH_ED25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8g backup@ops"

_VALID: Document = {
    "listen": ":8080",
    "admin_listen": "127.0.0.1:9090",
    "metrics_listen": ":9100",
    "agent_listen": ":7443",
    "agent_tls": {"cert_file": "/etc/llmgw/tls/server.crt", "key_file": "/etc/llmgw/tls/server.key"},
    "auth": {
        "enabled": True,
        "store": "/var/lib/llmgw/auth.db",
        "usage_retention": "720h",
        "oidc": {
            "issuer": "https://login.example.com/realms/staff",
            "client_id": "llmgw",
            "client_secret_file": "vault:secret/llmgw/oidc#client_secret",
            "allowed_domains": ["example.com"],
        },
        "scim": {"enabled": True, "token_file": "env:SCIM_TOKEN"},
        "personal": {"rpm": 10, "budget": 100, "period": "month"},
        "pricing": {"chat": {"prompt_per_1k": 10, "completion_per_1k": 30}},
    },
    "threads": {"store": "/var/lib/llmgw/threads.db", "retain_hours": 72},
    "landing": {"contact": "https://wiki.example.com/llm", "language": "tr"},
    "monitoring": {"prometheus": "http://prometheus:9090", "window": "6h"},
    "tracing": {"endpoint": "collector:4317", "sample_ratio": 0.1},
    "mirror": {"api": "https://mirror.internal:8082", "tls": {"ca_file": "/etc/llmgw/tls/ca.crt"}},
    "offline": {"mirror": "http://mirror.internal:8081"},
    "engines": {"sglang": "0.5.2", "vllm": "0.30.1"},
    "engine_overrides": [{"gpu_class": "v100-32g", "engines": {"vllm": "0.10.2"}}],
    "guard": {
        "default": "baseline",
        "policies": [
            {"name": "baseline", "checks": [{"type": "secrets", "action": "redact"}]},
            {"name": "strict", "checks": [{"type": "regex", "patterns": ["(?i)confidential"]}]},
        ],
    },
    "secrets": {
        "vault": {"address": "https://vault.internal:8200", "token_file": "/etc/llmgw/vault-token"},
        "master_key": "vault-transit:llmgw",
    },
    "notify": {
        "webhooks": [{"name": "ops", "url": "https://hooks.example.com/llmgw", "events": ["node.lost"]}]
    },
    "firewall_networks": ["10.20.0.0/16", "192.168.1.7"],
    "backup_recipients": [AGE_RECIPIENT, SSH_ED25519],
    "backup_copy_to": ["/mnt/backup/llmgw", "ssh://backup@store.internal:2222/srv/llmgw"],
    "backup_copy_key": "/etc/llmgw/backup_ed25519",
    "router": {
        "retries": 1,
        "trusted_proxies": ["10.0.0.1", "fd00::/8"],
        "kv_index": {"min_blocks": 8},
        "admission": {
            "default_band": "silver",
            "queue_capacity_total": 3000,
            "bands": [
                {"name": "platinum", "priority": 400, "saturation_ceiling": 1.0},
                {"name": "silver", "priority": 200, "saturation_ceiling": 0.6},
            ],
        },
    },
    "control": {"timezone": "Europe/Istanbul", "port_range": [21000, 21999]},
    "facility": {
        "margin": 0.1,
        "gpu_watts": 350,
        "budgets": [
            {"domain": "rack:r12-07", "cap_watts": 12000},
            {"domain": "pdu:r12-07-a", "cap_watts": 7000},
        ],
    },
    "federation": {"name": "ist-1", "interval": "30s"},
    "models": [
        {
            "name": "chat",
            "source": "Qwen/Qwen3-8B",
            "profiles": [{"name": "l40s", "engine": "vllm", "gpu_class": "l40s-48g"}],
            "scaling": {"min": 1, "max": 2},
        }
    ],
    "endpoints": [{"id": "sim-1", "url": "http://127.0.0.1:8001", "engine": "sim", "models": ["chat"]}],
}


def set_path(document: Document, path: str, value: Any) -> Document:
    """`document` with the value at `router.admission.bands.0.name` replaced."""
    out = copy.deepcopy(document)
    *parents, last = path.split(".")
    node: Any = out
    for step in parents:
        node = node[int(step)] if isinstance(node, list) else node.setdefault(step, {})
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return out


def load(document: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> Settings:
    return settings_from_mapping(document, source="test.yaml", environ=environ or {})


def problems_of(document: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> list[str]:
    try:
        load(document, environ)
    except ConfigError as exc:
        return list(exc.problems)
    return []


@pytest.fixture(autouse=True)
def _no_llmgw_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.upper().startswith("LLMGW_"):
            monkeypatch.delenv(name)


@pytest.fixture
def valid() -> Document:
    return copy.deepcopy(_VALID)


@pytest.fixture
def changed(valid: Document) -> Callable[[str, Any], Document]:
    return lambda path, value: set_path(valid, path, value)


@pytest.fixture
def check() -> Callable[..., list[str]]:
    return problems_of


@pytest.fixture
def build() -> Callable[..., Settings]:
    return load
