"""Per-tenant and per-tag metrics, counted in dictionaries as usage arrives and turned
into Prometheus families when scraped (as the gateway's own metrics are).

Tenant series are labelled at one level of the tree (`router.tenant_label`: org, team
or project; none turns them off), because a label per project on a large installation
is more series than Prometheus wants. Tag series exist only for the tags named in
`router.tag_labels`, each counting its first 100 values apart and the rest as "other":
tag values are the client's to choose, and every value is a series.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from llmgw.auth.budgets import BudgetLedger
from llmgw.auth.policy import DEFAULT_BUDGET_PERIOD
from llmgw.store.rows import Scope, ScopeKind

MAX_TAG_VALUES = 100
OTHER = "other"


_STATUS_CLASSES = tuple(f"{hundred}xx" for hundred in range(10))


def status_class(status: int) -> str:
    hundred = status // 100
    # A table for HTTP's statuses: a string made per request costs more than the lookup.
    return _STATUS_CLASSES[hundred] if 0 <= hundred < 10 else f"{hundred}xx"


@dataclass(frozen=True, slots=True)
class PipelineState:
    """The accounting pipeline's own figures, read at scrape time."""

    written: int
    dropped: int
    buffered: int
    write_failures: int
    sync_failures: int
    gateways: int
    refusals_unrecorded: int = 0
    unauthenticated: int = 0


@dataclass(frozen=True, slots=True)
class BudgetFigure:
    """One budget written on a scope, and what the scope has spent in its period."""

    scope: str
    period: str
    limit_micros: int
    spent_micros: int


def budget_figures(
    scopes: Mapping[ScopeKind, Mapping[str, Scope]], ledger: BudgetLedger, now: float
) -> list[BudgetFigure]:
    """Every budget written on an org, team, project or person (`scopes` by kind, then
    id), with its spend in the current period as the ledger knows it. A person's budget
    from `auth.personal`'s default is left out: one series per person would be as many
    series as people."""
    out: list[BudgetFigure] = []
    for kind, by_id in scopes.items():
        for scope in by_id.values():
            if not scope.budget_micros or scope.budget_micros <= 0:
                continue
            name = f"{kind}:{scope.id}"
            period = scope.budget_period or DEFAULT_BUDGET_PERIOD
            out.append(BudgetFigure(name, period, scope.budget_micros, ledger.spent(name, period, now)))
    return out


class TenantMetrics:
    """Counts per tenant and per tag value."""

    def __init__(self, level: str, tag_labels: Sequence[str]) -> None:
        self.level = level if level in ("org", "team", "project") else "none"
        self.tag_labels = tuple(tag_labels)
        self.requests: dict[tuple[str, str, str], int] = {}
        self.tokens: dict[tuple[str, str, str], int] = {}
        self.refusals: dict[tuple[str, str], int] = {}
        # Millionths of a budget unit charged, by model, and by tenant and model at the
        # tenant level.
        self.spend: dict[str, int] = {}
        self.tenant_spend: dict[tuple[str, str], int] = {}
        self.tagged_requests: dict[tuple[str, str], int] = {}
        self.tagged_tokens: dict[tuple[str, str, str], int] = {}
        self._tag_values: dict[str, set[str]] = {tag: set() for tag in self.tag_labels}

    def _tag_value(self, tag: str, value: str) -> str:
        seen = self._tag_values[tag]
        if value in seen:
            return value
        if len(seen) < MAX_TAG_VALUES:
            seen.add(value)
            return value
        return OTHER

    def counted(
        self, tenant: str | None, model: str, status: int, requests: int, prompt: int, completion: int
    ) -> None:
        """Counts answered requests of one tenant, model and status."""
        if tenant is not None and self.level != "none":
            key = (tenant, model, status_class(status))
            self.requests[key] = self.requests.get(key, 0) + requests
            for kind, count in (("prompt", prompt), ("completion", completion)):
                token_key = (tenant, model, kind)
                self.tokens[token_key] = self.tokens.get(token_key, 0) + count

    def spent(self, tenant: str | None, model: str, micros: int) -> None:
        """Counts what answered requests of one tenant and model cost (once per group of
        requests alike, off the request path)."""
        self.spend[model] = self.spend.get(model, 0) + micros
        if tenant is not None and self.level != "none":
            key = (tenant, model)
            self.tenant_spend[key] = self.tenant_spend.get(key, 0) + micros

    def tagged(self, tags: Mapping[str, str], prompt: int, completion: int) -> None:
        """Counts one answered request under each of its tags that is a label."""
        for tag in self.tag_labels:
            raw = tags.get(tag)
            if raw is None:
                continue
            value = self._tag_value(tag, raw)
            self.tagged_requests[(tag, value)] = self.tagged_requests.get((tag, value), 0) + 1
            for kind, count in (("prompt", prompt), ("completion", completion)):
                tkey = (tag, value, kind)
                self.tagged_tokens[tkey] = self.tagged_tokens.get(tkey, 0) + count

    def refused(self, tenant: str | None, reason: str) -> None:
        if tenant is not None and self.level != "none":
            self.refusals[(tenant, reason)] = self.refusals.get((tenant, reason), 0) + 1


class TenantCollector(Collector):
    """Exports `TenantMetrics` and the accounting pipeline's state."""

    def __init__(
        self,
        metrics: TenantMetrics,
        pipeline: Callable[[], PipelineState],
        budgets: Callable[[], Iterable[BudgetFigure]] = tuple,
    ) -> None:
        self._metrics = metrics
        self._pipeline = pipeline
        self._budgets = budgets

    def collect(self) -> Iterator[Metric]:
        m = self._metrics
        if m.level != "none":
            requests = CounterMetricFamily(
                "llmgw_tenant_requests",
                f"Requests per {m.level}, model and status class.",
                labels=[m.level, "model", "status"],
            )
            for labels, count in m.requests.items():
                requests.add_metric(list(labels), count)
            yield requests
            tokens = CounterMetricFamily(
                "llmgw_tenant_tokens",
                f"Tokens per {m.level}, model and kind (prompt, completion).",
                labels=[m.level, "model", "kind"],
            )
            for token_labels, count in m.tokens.items():
                tokens.add_metric(list(token_labels), count)
            yield tokens
            refusals = CounterMetricFamily(
                "llmgw_tenant_refusals",
                f"Requests refused per {m.level} by a limit or a budget.",
                labels=[m.level, "reason"],
            )
            for refusal_labels, count in m.refusals.items():
                refusals.add_metric(list(refusal_labels), count)
            yield refusals
            tenant_spend = CounterMetricFamily(
                "llmgw_tenant_spend",
                f"What answered requests cost, in budget units at the prices auth's pricing sets, per "
                f"{m.level} and model.",
                labels=[m.level, "model"],
            )
            for spend_labels, micros in m.tenant_spend.items():
                tenant_spend.add_metric(list(spend_labels), micros / 1e6)
            yield tenant_spend
        if m.tag_labels:
            tagged = CounterMetricFamily(
                "llmgw_tagged_requests",
                "Requests per value of each tag in router.tag_labels.",
                labels=["tag", "value"],
            )
            for tag_labels, count in m.tagged_requests.items():
                tagged.add_metric(list(tag_labels), count)
            yield tagged
            tagged_tokens = CounterMetricFamily(
                "llmgw_tagged_tokens",
                "Tokens per value of each tag in router.tag_labels.",
                labels=["tag", "value", "kind"],
            )
            for tagged_labels, count in m.tagged_tokens.items():
                tagged_tokens.add_metric(list(tagged_labels), count)
            yield tagged_tokens
        spend = CounterMetricFamily(
            "llmgw_spend",
            "What answered requests cost, in budget units at the prices auth's pricing sets "
            "(whatever unit the operator prices in, often dollars), by model.",
            labels=["model"],
        )
        for model, micros in m.spend.items():
            spend.add_metric([model], micros / 1e6)
        yield spend
        yield from self._budget_families()
        state = self._pipeline()
        yield CounterMetricFamily(
            "llmgw_usage_records_written", "Usage records written to the store.", value=state.written
        )
        yield CounterMetricFamily(
            "llmgw_usage_records_dropped",
            "Usage records dropped because the buffer was full (auth.buffer_size).",
            value=state.dropped,
        )
        yield GaugeMetricFamily(
            "llmgw_usage_records_buffered", "Usage records waiting.", value=state.buffered
        )
        yield CounterMetricFamily(
            "llmgw_usage_write_failures", "Usage batches the store refused.", value=state.write_failures
        )
        yield CounterMetricFamily(
            "llmgw_auth_sync_failures",
            "Exchanges of limit counts, spend or keys with the store that failed.",
            value=state.sync_failures,
        )
        yield GaugeMetricFamily(
            "llmgw_auth_gateways", "Gateways sharing the limits, as last heard.", value=state.gateways
        )
        yield CounterMetricFamily(
            "llmgw_usage_refusals_unrecorded",
            "Refused requests over the bounds on their usage records (per caller and in all, a second).",
            value=state.refusals_unrecorded,
        )
        yield CounterMetricFamily(
            "llmgw_auth_unauthenticated",
            "Requests refused 401 on the generation routes (no caller: counted, never recorded).",
            value=state.unauthenticated,
        )

    def _budget_families(self) -> Iterator[Metric]:
        limit = GaugeMetricFamily(
            "llmgw_budget_limit",
            "Each budget written on a scope (org:ID, team:ID, project:ID, user:ID), in budget units a "
            "period.",
            labels=["scope", "period"],
        )
        spent = GaugeMetricFamily(
            "llmgw_budget_spent",
            "What each scope with a budget has spent in its current period (day or month, UTC), in "
            "budget units, as this gateway knows it (the store's totals and its own unwritten spend).",
            labels=["scope", "period"],
        )
        for figure in self._budgets():
            labels = [figure.scope, figure.period]
            limit.add_metric(labels, figure.limit_micros / 1e6)
            spent.add_metric(labels, figure.spent_micros / 1e6)
        yield limit
        yield spent
