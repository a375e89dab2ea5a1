"""The defaults are the reference's Default(), zero-means-default values resolve to the
amount in force, and the derived readings (control plane mode, releases, offline,
facility policy) say what the reference says."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from llmgw.config import DEFAULT_OFFLINE_CHECKSUMS, Admission, Band, Settings, load_settings
from llmgw.hardware.facility import Domain, Level

S = timedelta(seconds=1)


def test_top_level_defaults() -> None:
    s = Settings()
    assert (s.listen, s.admin_listen, s.agent_listen, s.metrics_listen) == (
        ":8080",
        "127.0.0.1:9090",
        ":7443",
        "",
    )
    assert s.max_connections == 10_000
    assert s.mirror.update_check == 6 * 3600 * S
    assert s.firewall.enabled is True
    assert s.auth.enabled is False
    assert s.admin_remote is s.debug_pprof is s.agent_insecure is False
    assert s.models == ()
    assert s.endpoints == ()


def test_control_defaults() -> None:
    c = Settings().control
    assert (c.interval, c.base_backoff, c.max_backoff) == (5 * S, 10 * S, 600 * S)
    assert (c.unreachable_after, c.lost_after) == (15 * S, 60 * S)
    assert c.port_range == (20000, 20999)
    assert (c.mgmt_interface, c.eval_dir, c.timezone, c.enabled) == ("eth0", "/etc/llmgw/eval", "", False)


def test_router_defaults() -> None:
    r = Settings().router
    assert (r.scrape_interval, r.scrape_timeout, r.stale_after, r.cooldown) == (2 * S, S, 10 * S, 15 * S)
    assert (r.retries, r.failure_threshold) == (2, 3)
    assert (r.default_profile, r.tenant_label, r.session_header) == ("chat", "team", "x-session-id")
    assert r.inject_usage is True
    assert r.max_body_bytes == 32 << 20
    t = r.timeouts
    assert (t.dial, t.response_header, t.first_token, t.idle, t.total) == (
        5 * S,
        60 * S,
        120 * S,
        60 * S,
        1800 * S,
    )
    assert t.generation == timedelta(0)
    sc = r.scoring
    assert (sc.target_waiting, sc.target_inflight, sc.kv_ceiling, sc.session_load_factor) == (4, 8, 0.9, 1.25)


def test_admission_defaults() -> None:
    a = Settings().router.admission
    assert a.enabled is True
    assert (a.band_header, a.default_band) == ("x-llmgw-band", "gold")
    assert [(b.name, b.priority, b.saturation_ceiling) for b in a.bands] == [
        ("platinum", 400, 1.0),
        ("gold", 300, 0.85),
        ("silver", 200, 0.6),
        ("bronze", 100, 0.3),
    ]
    assert (a.queue_ttl, a.queue_capacity_per_band, a.interval) == (30 * S, 2000, timedelta(milliseconds=10))


def test_zero_means_the_built_in_amount() -> None:
    s = Settings()
    r = s.router
    assert (r.batch.max_file_bytes, r.batch.effective_max_file_bytes) == (0, 100 << 20)
    assert (r.batch.effective_max_lines, r.batch.effective_concurrency, r.batch.effective_retain_days) == (
        50_000,
        4,
        30,
    )
    assert (r.cache.effective_max_bytes, r.cache.effective_max_entry_bytes) == (128 << 20, 1 << 20)
    kv = r.kv_index
    assert (kv.effective_tokenize_timeout, kv.effective_min_blocks, kv.effective_max_blocks) == (
        timedelta(milliseconds=250),
        4,
        4096,
    )
    assert r.effective_activation_wait == 120 * S
    p = r.prefix
    assert (p.effective_max_nodes, p.effective_min_match, p.effective_ttl) == (100_000, 64, 300 * S)
    assert (p.effective_match_ratio, p.effective_balance_abs, p.effective_balance_rel) == (0.5, 32, 1.5)
    assert r.admission.effective_queue_capacity_total == 4000  # half of 4 bands x 2000
    assert s.federation.effective_interval == 10 * S
    assert s.facility.effective_measured_fresh == 120 * S
    assert s.monitoring.effective_window == 3600 * S
    assert s.control.effective_lease_ttl == 15 * S
    assert s.effective_backup_dir == "/var/backups/llmgw-server"


def test_written_values_win_over_the_built_in_amount(build: Callable[..., Settings]) -> None:
    s = build(
        {"router": {"batch": {"concurrency": 9}, "activation_wait": "30s"}, "control": {"lease_ttl": "1m"}}
    )
    assert s.router.batch.concurrency == s.router.batch.effective_concurrency == 9
    assert s.router.effective_activation_wait == 30 * S
    assert s.control.effective_lease_ttl == 60 * S


def test_queue_total_follows_the_bands() -> None:
    bands = (
        Band(name="a", priority=2, saturation_ceiling=1),
        Band(name="b", priority=1, saturation_ceiling=0.5),
    )
    assert (
        Admission(bands=bands, default_band="a", queue_capacity_per_band=100).effective_queue_capacity_total
        == 100
    )


def test_empty_tenant_label_means_none(build: Callable[..., Settings]) -> None:
    assert build({"router": {"tenant_label": ""}}).router.effective_tenant_label == "none"


def test_settings_are_frozen() -> None:
    s = Settings()
    with pytest.raises(ValidationError):
        s.listen = ":1"  # type: ignore[misc]


def test_constructing_never_reads_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLMGW_ROUTER__RETRIES", "9")
    monkeypatch.setenv("LLMGW_LISTEN", ":1234")
    assert Settings().router.retries == 2
    assert Settings().listen == ":8080"
    assert load_settings(None, {}).router.retries == 2


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ({}, True),  # neither endpoints nor models: a new cluster's control plane
        ({"endpoints": [{"id": "a", "url": "http://e:1", "models": ["m"]}]}, False),
        (
            {"endpoints": [{"id": "a", "url": "http://e:1", "models": ["m"]}], "control": {"enabled": True}},
            True,
        ),
    ],
)
def test_control_plane_mode(build: Callable[..., Settings], document: dict[str, Any], expected: bool) -> None:
    assert build(document).control_plane_mode is expected


def test_a_model_with_profiles_makes_a_control_plane(
    valid: dict[str, Any], build: Callable[..., Settings]
) -> None:
    assert valid["endpoints"]
    assert valid["models"][0]["profiles"]
    assert build(valid).control_plane_mode is True


def test_releases_base(build: Callable[..., Settings]) -> None:
    assert build({}).releases_base == ""
    offline = build({"offline": {"mirror": "http://m:8081/"}})
    assert offline.releases_base == "http://m:8081/_llmgw/releases"
    chosen = build({"offline": {"mirror": "http://m:8081"}, "releases": "https://r.example.com"})
    assert chosen.releases_base == "https://r.example.com"


def test_offline_helpers(build: Callable[..., Settings]) -> None:
    off = build({}).offline
    assert (off.enabled, off.checksums_file) == (False, DEFAULT_OFFLINE_CHECKSUMS)
    on = build({"offline": {"mirror": "https://m:8081", "checksums": "/srv/sums"}}).offline
    assert (on.enabled, on.checksums_file) == (True, "/srv/sums")


def test_facility_policy(valid: dict[str, Any], build: Callable[..., Settings]) -> None:
    policy = build(valid).facility.policy()
    assert policy.margin == 0.1
    assert policy.gpu_watts == 350
    assert policy.measured_fresh == 120 * S
    rack = Domain(Level.RACK, "r12-07")
    assert policy.budgets[rack].cap_watts == 12000
    assert set(policy.budgets) == {rack, Domain(Level.PDU, "r12-07-a")}


def test_federation_name_falls_back_to_the_host(build: Callable[..., Settings]) -> None:
    assert build({}).federation.effective_name(lambda: "gw-3") == "gw-3"
    assert build({"federation": {"name": "ist"}}).federation.effective_name(lambda: "gw-3") == "ist"


def test_admin_token_file(build: Callable[..., Settings], tmp_path: Any) -> None:
    s = build({})
    assert str(s.effective_admin_token_file(tmp_path, "/var/lib/llmgw")) == "/var/lib/llmgw/admin-token"
    assert s.effective_admin_token_file(tmp_path, None) == tmp_path / "secrets" / "admin-token"
    chosen = build({"admin_token_file": "/etc/llmgw/token"})
    assert str(chosen.effective_admin_token_file(tmp_path, "/var/lib/llmgw")) == "/etc/llmgw/token"


def test_tracing_endpoint_falls_back_to_the_standard_variable(build: Callable[..., Settings]) -> None:
    tracing = build({}).tracing
    assert tracing.effective_endpoint({}) == ""
    assert tracing.effective_endpoint({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}) == "http://c:4318"
