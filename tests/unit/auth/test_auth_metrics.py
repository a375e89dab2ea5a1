"""Per-tenant and per-tag series: the label level, the 100-value cap, the pipeline."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from llmgw.auth.metrics import MAX_TAG_VALUES, PipelineState, TenantCollector, TenantMetrics


def scrape(metrics: TenantMetrics) -> str:
    registry = CollectorRegistry()
    registry.register(TenantCollector(metrics, lambda: PipelineState(10, 2, 3, 1, 4, 2)))
    return generate_latest(registry).decode()


def test_tenant_series_at_the_configured_level() -> None:
    metrics = TenantMetrics("team", ())
    metrics.counted("search", "m1", 200, 3, 10, 5)
    metrics.counted("search", "m1", 503, 1, 0, 0)
    metrics.refused("search", "rate_limit")
    page = scrape(metrics)
    assert 'llmgw_tenant_requests_total{model="m1",status="2xx",team="search"} 3.0' in page
    assert 'llmgw_tenant_requests_total{model="m1",status="5xx",team="search"} 1.0' in page
    assert 'llmgw_tenant_tokens_total{kind="completion",model="m1",team="search"} 5.0' in page
    assert 'llmgw_tenant_refusals_total{reason="rate_limit",team="search"} 1.0' in page
    assert "llmgw_usage_records_dropped_total 2.0" in page
    assert "llmgw_auth_gateways 2.0" in page


def test_level_none_has_no_tenant_series() -> None:
    metrics = TenantMetrics("", ())
    metrics.counted("x", "m", 200, 1, 1, 1)
    assert "llmgw_tenant_requests" not in scrape(metrics)


def test_each_tag_counts_its_first_100_values_apart() -> None:
    metrics = TenantMetrics("none", ("run",))
    for i in range(MAX_TAG_VALUES + 20):
        metrics.tagged({"run": f"r{i}", "ignored": "x"}, 1, 2)
    metrics.tagged({"run": "r0"}, 1, 2)
    assert metrics.tagged_requests[("run", "r0")] == 2
    assert metrics.tagged_requests[("run", "other")] == 20
    assert len({value for tag, value in metrics.tagged_requests}) == MAX_TAG_VALUES + 1
    assert 'llmgw_tagged_tokens_total{kind="completion",tag="run",value="other"} 40.0' in scrape(metrics)
