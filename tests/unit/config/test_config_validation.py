"""Every validation rule of the settings, one change to the valid configuration each.

Each case asserts that exactly one problem comes back, that it names the file and the
field, and that it says what to write instead."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

MIB = 1 << 20

# (path changed, new value, fragments the one problem must contain)
CASES: list[tuple[str, Any, tuple[str, ...]]] = [
    ("listen", "", ("listen:", "host:port")),
    ("listen", "8080", ("listen:", "'8080'", ":8080")),
    ("listen", "[::1:8080", ("listen:", "bracket")),
    ("admin_listen", "0.0.0.0:9090", ("admin_listen:", "admin_remote: true")),
    ("metrics_listen", "127.0.0.1:8080", ("metrics_listen:", "another port")),
    ("max_connections", -5, ("max_connections:", "0 or more")),
    ("agent_tls.key_file", "", ("agent_tls.key_file:", "give key_file")),
    ("agent_tls.min_version", 1.1, ("agent_tls.min_version:", "1.2 or 1.3")),
    ("auth.store", "", ("auth.store:", "auth is on", "/var/lib/llmgw/auth.db")),
    ("auth.usage_retention", "1h", ("auth.usage_retention:", "24h minimum")),
    ("auth.default_rpm", -1, ("auth.default_rpm:", "0 or more")),
    ("auth.oidc.client_id", "", ("auth.oidc.client_id:", "required")),
    ("auth.oidc.issuer", "http://login.example.com", ("auth.oidc.issuer:", "https://")),
    ("auth.oidc.scopes", ["profile"], ("auth.oidc.scopes:", "openid")),
    ("auth.oidc.allowed_domains", ["@example.com"], ("auth.oidc.allowed_domains[0]:", "without the @")),
    ("auth.oidc.client_secret_file", "env:1BAD", ("auth.oidc.client_secret_file:", "variable name")),
    ("auth.scim.token_file", "", ("auth.scim.token_file:", "required")),
    ("auth.personal.period", "week", ("auth.personal.period:", "day or month")),
    ("auth.pricing.chat.prompt_per_1k", -3, ("auth.pricing.chat.prompt_per_1k:", "0 or more")),
    ("threads.retain_hours", 0, ("threads.retain_hours:", "like 72")),
    ("landing.language", "fr", ("landing.language:", "en or tr")),
    ("monitoring.prometheus", "prometheus:9090", ("monitoring.prometheus:", "https://")),
    ("monitoring.window", "-1h", ("monitoring.window:", "0s or more")),
    ("tracing.protocol", "udp", ("tracing.protocol:", "grpc or http")),
    ("log_format", "xml", ("log_format:", "text or json")),
    ("tracing.endpoint", "collector", ("tracing.endpoint:", "host:port")),
    ("tracing.sample_ratio", 2, ("tracing.sample_ratio:", "0 to 1")),
    ("mirror.api", "http://mirror.internal:8082", ("mirror.api:", "https://")),
    ("offline.mirror", "mirror.internal:8081", ("offline.mirror:", "http://host:8081")),
    ("offline.mirror", "http://mirror.internal:8082/", ("offline.mirror:", "admin API port", ":8081")),
    ("engines", {"vlm": "0.30.0"}, ("engines.vlm:", "did you mean vllm")),
    ("engine_overrides.0.gpu_class", "", ("engine_overrides[0]:", "add a gpu_class, nodes or labels")),
    ("engine_overrides.0.engines", {}, ("engine_overrides[0].engines:", '"" to remove')),
    ("guard.default", "strictt", ("guard.default:", "did you mean 'strict'")),
    ("guard.policies.1.name", "baseline", ("guard.policies[1].name:", "policies[0]")),
    ("guard.policies.1.checks", [], ("guard.policies[1].checks:", "at least one check")),
    ("guard.policies.1.checks.0.patterns", [], ("guard.policies[1].checks[0].patterns:", "at least one")),
    ("guard.policies.1.checks.0.patterns", ["("], ("checks[0].patterns[0]:", "not a regular expression")),
    ("guard.policies.1.checks.0.stage", "prompt", ("checks[0].stage:", "input, output, both")),
    (
        "guard.policies.1.checks",
        [{"type": "model", "model": "judge", "action": "redact"}],
        ("guard.policies[1].checks[0].action:", "block or flag"),
    ),
    ("secrets.vault.token_file", "", ("secrets.vault.address:", "token_file")),
    ("secrets.vault.role_id", "llmgw", ("secrets.vault.token_file:", "not both")),
    ("secrets.master_key", "vault-transit:", ("secrets.master_key:", "one transit key")),
    (
        "auth.oidc.client_secret_file",
        "vault:oidc",
        ("auth.oidc.client_secret_file:", "vault:mount/path#field"),
    ),
    ("notify.webhooks.0.url", "hooks.example.com", ("notify.webhooks[0].url:", "http")),
    ("notify.webhooks.0.events", ["node.lots"], ("notify.webhooks[0].events[0]:", "did you mean node.lost")),
    ("notify.webhooks.0.timeout", "0s", ("notify.webhooks[0].timeout:", "above zero")),
    (
        "notify.webhooks",
        [{"url": "https://h.example/a"}, {"url": "https://h.example/b"}],
        ("notify.webhooks[1].name:", "'h.example' is already webhooks[0]'s name"),
    ),
    ("firewall_networks", ["10.20.0.0/33"], ("firewall_networks[0]:", "CIDR")),
    (
        "backup_recipients",
        ["age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8q"],
        ("age-keygen",),
    ),
    ("backup_recipients", ["ssh-dss AAAAB3NzaC1kc3M="], ("backup_recipients[0]:", "ssh-ed25519")),
    ("backup_recipients", ["ssh-ed25519 AAAAB3NzaC1yc2E="], ("backup_recipients[0]:", "whole line")),
    ("backup_copy_to", ["backups/llmgw"], ("backup_copy_to[0]:", "absolute path")),
    ("backup_copy_to", ["ssh://store.internal/srv"], ("backup_copy_to[0]:", "ssh://user@host")),
    ("backup_copy_key", "", ("backup_copy_to[1]:", "set backup_copy_key")),
    ("backup_recipients", [], ("backup_copy_to:", "without backup_recipients")),
    ("backup_schedule", "3am", ("backup_schedule:", "HH:MM in UTC")),
    ("backup_schedule", "24:00", ("backup_schedule:", "HH:MM in UTC")),
    ("backup_keep", 0, ("backup_keep:", "above zero")),
    ("router.tenant_label", "dept", ("router.tenant_label:", "org, team, project or none")),
    ("router.failure_threshold", 0, ("router.failure_threshold:", "above zero")),
    ("router.max_body_bytes", 0, ("router.max_body_bytes:", "above zero")),
    (
        "router.max_body_memory_bytes",
        MIB,
        ("router.max_body_memory_bytes:", "below max_body_bytes", "raise it"),
    ),
    ("router.timeouts.body_min_rate", -1, ("router.timeouts.body_min_rate:", "0 or more")),
    ("router.timeouts.dial", 5, ("router.timeouts.dial:", "5s")),
    ("router.timeouts.idle", "-1s", ("router.timeouts.idle:", "negative")),
    ("router.scrape_interval", "0s", ("router.scrape_interval:", "above zero")),
    ("router.trusted_proxies", ["proxy.internal"], ("router.trusted_proxies[0]:", "CIDR")),
    ("router.session_header", "x session", ("router.session_header:", "header name")),
    ("router.kv_index.min_blocks", 5000, ("router.kv_index.min_blocks:", "max_blocks")),
    ("router.cache.max_entry_bytes", 200 * MIB, ("router.cache.max_entry_bytes:", "max_bytes")),
    ("router.scoring.kv_ceiling", 1.5, ("router.scoring.kv_ceiling:", "0 to 1")),
    ("router.scoring.target_waiting", 0, ("router.scoring.target_waiting:", "above zero")),
    ("router.admission.default_band", "slver", ("router.admission.default_band:", "did you mean 'silver'")),
    ("router.admission.bands.0.saturation_ceiling", 0, ("bands[0].saturation_ceiling:", "above 0")),
    ("router.admission.bands.1.priority", 400, ("bands[1].priority:", "its own priority")),
    ("router.admission.bands.0.name", "silver", ("bands[1].name:", "its own name")),
    ("router.admission.band_header", "", ()),  # an empty header is allowed: clients cannot pick
    ("control.timezone", "Europe/Istambul", ("control.timezone:", "IANA")),
    ("control.port_range", [21999, 21000], ("control.port_range:", "first <= last")),
    ("control.lost_after", "10s", ("control.lost_after:", "unreachable_after")),
    ("control.scale_down_at", 1.0, ("control.scale_down_at:", "below scale_up_at")),
    ("control.scale_up_after", "0s", ("control.scale_up_after:", "above zero")),
    ("control.interval", "0s", ("control.interval:", "above zero")),
    ("facility.margin", 1, ("facility.margin:", "0.1 for 10%")),
    ("facility.gpu_watts", -1, ("facility.gpu_watts:", "0 or more")),
    ("facility.budgets.0.domain", "r12-07", ("facility.budgets[0].domain:", "level:name")),
    ("facility.budgets.1.domain", "Rack:r12-07", ("facility.budgets[1].domain:", "give each domain once")),
    ("facility.budgets.0.cap_watts", 0, ("facility.budgets[0].cap_watts:", "above 0")),
    ("facility.budgets.0.other_watts", -5, ("facility.budgets[0].other_watts:", "0 or more")),
    ("endpoints.0.url", "127.0.0.1:8001", ("endpoints[0].url:", "http://")),
    ("endpoints.0.id", "", ("endpoints[0].id:", "required")),
    ("endpoints.0.models", [], ("endpoints[0].models:", "at least one model")),
    ("endpoints.0.engine", "vlm", ("endpoints[0].engine:", "vllm")),
    (
        "endpoints.0",
        {
            "id": "l-1",
            "url": "http://127.0.0.1:8001",
            "engine": "llamacpp",
            "models": ["chat"],
            "priority_scheduling": True,
        },
        ("endpoints[0].priority_scheduling:", "vllm or sim"),
    ),
    ("endpoints.0.lora_ids", {"sql": 0}, ("endpoints[0].lora_ids:", "for llamacpp endpoints")),
    (
        "endpoints.0",
        {
            "id": "l-1",
            "url": "http://127.0.0.1:8001",
            "engine": "llamacpp",
            "models": ["chat"],
            "lora_ids": {"sql": -1},
        },
        ("endpoints[0].lora_ids.sql:", "from 0"),
    ),
    ("models.0.profiles.0.gpu_class", "", ("models:", "gpu_class")),
    ("models.0.name", "", ("models[0]:", "no name")),
]


@pytest.mark.parametrize(("path", "value", "fragments"), CASES, ids=[f"{c[0]}={c[1]!r}"[:60] for c in CASES])
def test_one_change_gives_one_problem(
    changed: Callable[[str, Any], dict[str, Any]],
    check: Callable[..., list[str]],
    path: str,
    value: Any,
    fragments: tuple[str, ...],
) -> None:
    problems = check(changed(path, value))
    if not fragments:
        assert problems == []
        return
    assert len(problems) == 1, problems
    assert problems[0].startswith("test.yaml: ")
    for fragment in fragments:
        assert fragment in problems[0]


def test_the_valid_configuration_is_valid(valid: dict[str, Any], check: Callable[..., list[str]]) -> None:
    assert check(valid) == []


def test_unknown_keys_name_the_nearest_key(valid: dict[str, Any], check: Callable[..., list[str]]) -> None:
    valid["router"]["retriez"] = 3
    valid["models"][0]["profiles"][0]["tpp"] = 2
    valid["auth"]["oidc"]["clientid"] = "x"
    problems = check(valid)
    assert "test.yaml: router.retriez: unknown key; did you mean router.retries?" in problems
    assert (
        "test.yaml: models[0].profiles[0].tpp: unknown key; did you mean models[0].profiles[0].tp?"
        in problems
    )
    assert "test.yaml: auth.oidc.clientid: unknown key; did you mean auth.oidc.client_id?" in problems


def test_problems_in_different_sections_come_together(
    valid: dict[str, Any], check: Callable[..., list[str]]
) -> None:
    valid["listen"] = "8080"
    valid["router"]["retries"] = "many"
    valid["control"]["timezone"] = "Mars/Base"
    valid["facility"]["margin"] = 2
    valid["models"][0]["profiles"][0]["gpu_class"] = ""
    problems = check(valid)
    assert len(problems) == 5, problems
    for field in ("listen:", "router.retries:", "control.timezone:", "facility.margin:", "models:"):
        assert any(field in p for p in problems), field


def test_several_rules_of_one_section_come_together(
    changed: Callable[[str, Any], dict[str, Any]], check: Callable[..., list[str]]
) -> None:
    document = changed("auth.oidc", {"issuer": "http://idp.example.com", "scopes": ["email"]})
    problems = check(document)
    assert len(problems) == 4, problems
    for field in ("oidc.issuer:", "oidc.client_id:", "oidc.client_secret_file:", "oidc.scopes:"):
        assert any(field in p for p in problems), field


def test_vault_references_need_vault(valid: dict[str, Any], check: Callable[..., list[str]]) -> None:
    valid["secrets"] = {}
    problems = check(valid)
    assert problems == [
        "test.yaml: auth.oidc.client_secret_file: 'vault:secret/llmgw/oidc#client_secret' "
        "is read from Vault, but secrets.vault.address is empty: configure it"
    ]


def test_transit_sealing_needs_vault(valid: dict[str, Any], check: Callable[..., list[str]]) -> None:
    valid["secrets"] = {"master_key": "vault-transit:llmgw"}
    valid["auth"]["oidc"]["client_secret_file"] = "/etc/llmgw/oidc-secret"
    problems = check(valid)
    assert len(problems) == 1
    assert "secrets.master_key:" in problems[0]
    assert "configure secrets.vault" in problems[0]


def test_vault_settings_without_an_address_are_refused(
    changed: Callable[[str, Any], dict[str, Any]], check: Callable[..., list[str]]
) -> None:
    document = changed("secrets.vault", {"namespace": "ops"})
    document["secrets"]["master_key"] = ""
    document["auth"]["oidc"]["client_secret_file"] = "/etc/llmgw/oidc-secret"
    problems = check(document)
    assert len(problems) == 1
    assert "secrets.vault.namespace:" in problems[0]
    assert "address is empty" in problems[0]


def test_admin_remote_allows_another_address(
    changed: Callable[[str, Any], dict[str, Any]], check: Callable[..., list[str]]
) -> None:
    document = changed("admin_listen", "10.0.0.5:9090")
    document["admin_remote"] = True
    assert check(document) == []


@pytest.mark.parametrize("address", ["127.0.0.1:9090", "localhost:9090", "[::1]:9090", "127.0.0.2:9999"])
def test_loopback_admin_addresses_need_nothing(
    changed: Callable[[str, Any], dict[str, Any]], check: Callable[..., list[str]], address: str
) -> None:
    assert check(changed("admin_listen", address)) == []


def test_null_section_keeps_its_defaults(valid: dict[str, Any], build: Callable[..., Any]) -> None:
    valid["tracing"] = None
    valid["router"]["timeouts"] = None
    settings = build(valid)
    assert settings.tracing.protocol == "grpc"
    assert settings.router.timeouts.total.total_seconds() == 1800
