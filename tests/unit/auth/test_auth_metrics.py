"""Per-tenant and per-tag series: the label level, the 100-value cap, the pipeline;
spend by model and tenant, and every budget written on a scope against its spend."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from llmgw.auth.budgets import BudgetLedger, current_periods
from llmgw.auth.metrics import (
    MAX_TAG_VALUES,
    BudgetFigure,
    PipelineState,
    TenantCollector,
    TenantMetrics,
    budget_figures,
)
from llmgw.store.rows import Scope, ScopeKind


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


def test_spend_is_counted_by_model_and_by_tenant_in_budget_units() -> None:
    metrics = TenantMetrics("team", ())
    metrics.spent("search", "m1", 1_500_000)
    metrics.spent("search", "m1", 250_000)
    metrics.spent(None, "m2", 40)
    page = scrape(metrics)
    assert 'llmgw_spend_total{model="m1"} 1.75' in page
    assert 'llmgw_spend_total{model="m2"} 4e-05' in page
    assert 'llmgw_tenant_spend_total{model="m1",team="search"} 1.75' in page


def test_every_budget_written_on_a_scope_is_exported_with_its_spend() -> None:
    now = 1_750_000_000.0
    ledger = BudgetLedger()
    ledger.charge({("team:search", "month", current_periods(now)["month"]): 9_000_000})
    scopes: dict[ScopeKind, dict[str, Scope]] = {
        "org": {"o": Scope("org", "o")},  # no budget: no series
        "team": {"search": Scope("team", "search", budget_micros=10_000_000)},
        "project": {"p": Scope("project", "p", budget_micros=2_000_000, budget_period="day")},
        "user": {},
    }
    figures = budget_figures(scopes, ledger, now)
    assert figures == [
        BudgetFigure("team:search", "month", 10_000_000, 9_000_000),
        BudgetFigure("project:p", "day", 2_000_000, 0),
    ]
    registry = CollectorRegistry()
    registry.register(
        TenantCollector(TenantMetrics("", ()), lambda: PipelineState(0, 0, 0, 0, 0, 0), lambda: figures)
    )
    page = generate_latest(registry).decode()
    assert 'llmgw_budget_limit{period="month",scope="team:search"} 10.0' in page
    assert 'llmgw_budget_spent{period="month",scope="team:search"} 9.0' in page
    assert 'llmgw_budget_spent{period="day",scope="project:p"} 0.0' in page
