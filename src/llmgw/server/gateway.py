"""Building the gateway's parts from the settings, and running them.

Everything the request path uses is created here, once, and passed in: the upstream
client and its pools, the endpoint registry, the picker with its prefix tree and
session table, the dispatcher, the metrics registry. Nothing is a module global, so
a test builds as many gateways as it likes in one process.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from prometheus_client import ProcessCollector

from llmgw.auth.gate import AuthGate
from llmgw.catalog import Catalog
from llmgw.config import Settings
from llmgw.config.router import Cors
from llmgw.errors import StoreMissing
from llmgw.guard import Guardrails, PolicySet
from llmgw.guard.counts import GuardCollector
from llmgw.http.rsgi import App
from llmgw.identity.scim import PREFIX as SCIM_PREFIX
from llmgw.identity.scim import ScimApp, read_token
from llmgw.obs.access import AccessLog
from llmgw.obs.build_info import BuildInfoCollector, build_info
from llmgw.router.access_log import AccessRecorder
from llmgw.router.admission import BandRule
from llmgw.router.affinity import SessionAffinity
from llmgw.router.app import GatewayApp
from llmgw.router.canary import Canaries
from llmgw.router.catalog_view import ModelsView
from llmgw.router.cors import CorsPolicy
from llmgw.router.departures import Departures
from llmgw.router.dispatch import Dispatcher
from llmgw.router.endpoints import EndpointRegistry
from llmgw.router.flow import FlowControl, FlowRules
from llmgw.router.forward import PhaseLimits
from llmgw.router.guard_judge import RouterJudge
from llmgw.router.kv_routing import KVRouting, KVRules
from llmgw.router.lora_loader import AdapterLoader
from llmgw.router.metrics import (
    BEFORE_ROUTE,
    CacheCollector,
    CanaryCollector,
    FlowCollector,
    GatewayMetrics,
    SloCollector,
    new_registry,
)
from llmgw.router.picker import Picker, PrefixRules
from llmgw.router.prefix_tree import PrefixTree
from llmgw.router.response_cache import ResponseCache
from llmgw.router.scoring import ScoringTargets
from llmgw.router.scraper import Scraper
from llmgw.router.slo import Objective, SloTracker
from llmgw.router.targets import TargetResolver
from llmgw.router.usage import Finished, UsageSink
from llmgw.server.admin import AdminApp, AdminRoutes
from llmgw.server.endpoints_static import static_specs
from llmgw.store import Scope, Store
from llmgw.upstream import UpstreamClient
from llmgw.upstream.watchdog import Watchdog

if TYPE_CHECKING:
    from llmgw.obs.provider import Traces
    from llmgw.obs.spans import Spans

log = logging.getLogger(__name__)

# A phase bound of 0 means "no bound"; in arithmetic that is a very long time.
_UNBOUNDED_SECONDS = 10.0 * 365 * 24 * 3600
# How many sessions affinity remembers, and for how long without a request.
_MAX_SESSIONS = 100_000
_SESSION_TTL_SECONDS = 3600.0


def _cors(cors: Cors) -> CorsPolicy | None:
    """The CORS policy, or None while no origin is allowed (CORS off)."""
    if not cors.origins:
        return None
    return CorsPolicy(cors.origins, cors.allow_headers, cors.max_age.total_seconds())


def _seconds(value: timedelta, *, zero_is_unbounded: bool = True) -> float:
    seconds = value.total_seconds()
    return _UNBOUNDED_SECONDS if seconds <= 0 and zero_is_unbounded else seconds


class Gateway:
    """The request path's parts, built from settings."""

    def __init__(
        self,
        settings: Settings,
        clock: Callable[[], float] = time.monotonic,
        *,
        auth: AuthGate | None = None,
        admin_api: AdminRoutes | None = None,
        debug: AdminRoutes | None = None,
        mounts: Sequence[tuple[str, App]] = (),
        vault: Mapping[str, str] | None = None,
        traces: Traces | None = None,
    ) -> None:
        """`mounts` are applications answering under a path prefix on the client port
        (SCIM at /scim/v2), built by the caller, which holds the store they need;
        `vault` the values of `vault:` references read at start (external keys)."""
        router = settings.router
        self.settings = settings
        # The server owns the tracer provider (and closes it); the gateway only starts spans.
        self.spans: Spans | None = traces.spans if traces is not None else None
        self.clock = clock
        self.catalog = settings.catalog()
        self.metrics = GatewayMetrics()
        self.client = UpstreamClient()
        self.endpoints = EndpointRegistry(self.client, router.failure_threshold, _seconds(router.cooldown))
        self.vault_values: Mapping[str, str] = vault or {}
        self.endpoints.publish(static_specs(settings, self.vault_values))
        self.registry = new_registry(self.metrics, self.endpoints, clock)
        # The process's own figures (CPU, memory, open files), in this registry rather
        # than prometheus_client's global one, which the gateway never exports.
        ProcessCollector(registry=self.registry)
        self.registry.register(BuildInfoCollector(build_info()))
        targets = ScoringTargets(
            target_waiting=router.scoring.target_waiting,
            target_inflight=router.scoring.target_inflight,
            kv_ceiling=router.scoring.kv_ceiling,
            session_load_factor=router.scoring.session_load_factor,
            stale_after=_seconds(router.stale_after),
        )
        admission = router.admission
        self.slo = SloTracker(_objectives(self.catalog))
        self.flow = FlowControl(
            FlowRules(
                enabled=admission.enabled,
                bands=tuple(BandRule(b.name, b.priority, b.saturation_ceiling) for b in admission.bands),
                default_band=admission.default_band,
                queue_ttl=admission.queue_ttl.total_seconds(),
                per_band=admission.queue_capacity_per_band,
                total=admission.effective_queue_capacity_total,
                interval=admission.interval.total_seconds(),
                activation_wait=router.effective_activation_wait.total_seconds(),
            ),
            self.endpoints,
            targets,
            self.slo,
            clock=clock,
        )
        self.registry.register(FlowCollector(self.flow))
        self.registry.register(SloCollector(self.slo))
        prefix = router.prefix
        tree = (
            PrefixTree(prefix.effective_max_nodes, _seconds(prefix.effective_ttl)) if prefix.enabled else None
        )
        self.picker = Picker(
            targets,
            SessionAffinity(_MAX_SESSIONS, _SESSION_TTL_SECONDS),
            tree,
            PrefixRules(
                min_match=prefix.effective_min_match,
                match_ratio=prefix.effective_match_ratio,
                balance_abs=prefix.effective_balance_abs,
                balance_rel=prefix.effective_balance_rel,
            ),
            kv_min_blocks=router.kv_index.effective_min_blocks,
        )
        kv_index = router.kv_index
        self.kv = KVRouting(
            self.endpoints,
            KVRules(
                tokenize_timeout_s=kv_index.effective_tokenize_timeout.total_seconds(),
                min_blocks=kv_index.effective_min_blocks,
                max_blocks=kv_index.effective_max_blocks,
            ),
        )
        self.usage = UsageSink(self.metrics)
        self.usage.consumers.append(self._observe_latency)
        self.auth = auth
        if auth is not None:
            self.registry.register(auth.collector)
            self.usage.consumers.append(self._account)
        self.access = AccessRecorder(AccessLog(), clock=clock) if router.access_log else None
        if self.access is not None:
            self.usage.consumers.append(self.access.finished)
        self.watchdog = Watchdog()
        self.departures = Departures()
        timeouts = router.timeouts
        limits = PhaseLimits(
            dial_s=_seconds(timeouts.dial),
            response_header_s=_seconds(timeouts.response_header),
            generation_s=timeouts.generation.total_seconds(),
            first_token_s=_seconds(timeouts.first_token),
            idle_s=_seconds(timeouts.idle),
            total_s=_seconds(timeouts.total),
            replica_fresh_s=_seconds(router.stale_after),
        )
        self.guard = Guardrails(
            PolicySet.from_settings(settings.guard),
            _judge_formats(self.catalog),
            RouterJudge(self.endpoints, limits, self.watchdog, clock, self.spans),
            clock,
            _judge_categories(self.catalog),
        )
        self.registry.register(GuardCollector(self.guard.counts))
        self.canaries = Canaries(self.catalog, clock)
        self.registry.register(CanaryCollector(self.canaries))
        # Switched on per project, so only with keys to know the project by.
        self.cache = (
            ResponseCache(router.cache.effective_max_bytes, router.cache.effective_max_entry_bytes, clock)
            if auth is not None
            else None
        )
        if self.cache is not None:
            self.registry.register(CacheCollector(self.cache))
        self.dispatcher = Dispatcher(
            self.endpoints,
            self.picker,
            self.metrics,
            self.usage,
            self.watchdog,
            limits,
            retries=router.retries,
            inject_usage=router.inject_usage,
            retry_after=max(1.0, router.cooldown.total_seconds()),
            clock=clock,
            guard=self.guard,
            canaries=self.canaries,
            cache=self.cache,
            # Loading an adapter reads its weights: bounded by a whole request's time.
            adapters=AdapterLoader(limits.total_s),
            kv=self.kv,
        )
        self.scraper = Scraper(
            self.endpoints, _seconds(router.scrape_interval), _seconds(router.scrape_timeout), clock
        )
        self.resolver = TargetResolver(self.catalog, router.default_profile)
        self.models_view = ModelsView(self.catalog, self.endpoints)
        self.app = GatewayApp(
            self.resolver,
            self.endpoints,
            self.dispatcher,
            self.models_view,
            router.max_body_bytes,
            router.session_header,
            self.departures,
            self.flow,
            admission.band_header,
            trust_band_header=not settings.auth.enabled,
            metrics=self.metrics,
            auth=auth,
            cors=_cors(router.cors),
            clock=clock,
            guard=self.guard,
            mounts=mounts,
            access=self.access,
            spans=self.spans,
            canaries=self.canaries,
            cache=self.cache,
        )
        self.admin = AdminApp(self.registry, self.ready, api=admin_api, debug=debug)
        self.metrics_app = AdminApp(self.registry, self.ready, metrics_only=True)

    def replace_catalog(self, catalog: Catalog) -> None:
        """A runtime catalog change (the control plane's): requests resolve names, list
        models and check limits against `catalog` from now on."""
        self.catalog = catalog
        self.guard.formats = _judge_formats(catalog)
        self.guard.narrowed = _judge_categories(catalog)
        self.resolver.replace(catalog)
        self.models_view.replace(catalog)
        self.slo.replace(_objectives(catalog))
        self.canaries.replace(catalog)

    def _observe_latency(self, batch: Sequence[Finished]) -> None:
        """Feeds the SLO tracker and the TPOT histogram from finished requests (off the
        request path)."""
        observe = self.slo.observe
        per_output_token = self.metrics.per_output_token
        for record, tokens in batch:
            if record.status != 200:
                continue
            ttft = None if record.first_byte is None else record.first_byte - record.started
            tpot = None
            if record.first_byte is not None and tokens is not None and tokens.completion > 1:
                tpot = (record.finished - record.first_byte) / (tokens.completion - 1)
                per_output_token(record.model, tpot)
            observe(record.model, record.finished, ttft, tpot)

    def _account(self, batch: Sequence[Finished]) -> None:
        """Hands finished requests to the auth gate: limits, budgets, usage store."""
        if self.auth is None:
            return
        self.auth.record_many(batch, time.time() - self.clock())

    def refused_by_server(self, status: int, reason: str) -> None:
        """Counts a request the client port's HTTP server answered in the application's
        stead (llmgw.http.http1_server's `on_refused`)."""
        self.metrics.refused(BEFORE_ROUTE, "", status, reason)

    def ready(self) -> bool:
        """Ready once the replicas have been asked for their load at least once."""
        return self.scraper.rounds > 0

    async def background(self) -> list[asyncio.Task[None]]:
        """Starts the loops the request path relies on: scraping and usage accounting."""
        await self.scraper.scrape_all()
        tasks = [
            asyncio.create_task(self.scraper.run(), name="scraper"),
            asyncio.create_task(self.usage.run(), name="usage"),
            asyncio.create_task(self.watchdog.run(), name="watchdog"),
            asyncio.create_task(self.departures.run(), name="departures"),
            asyncio.create_task(self.flow.run(), name="admission"),
            asyncio.create_task(self.kv.run(), name="kv-index"),
        ]
        if self.access is not None:
            tasks.append(asyncio.create_task(self.access.run(), name="access-log"))
        return tasks

    def close(self) -> None:
        self.usage.drain()
        if self.access is not None:
            self.access.flush()
        self.client.close()


def _judge_formats(catalog: Catalog) -> dict[str, str]:
    """Each guard model's answer format, for the guard's judge rules."""
    return {m.name: m.guard.format for m in catalog.models() if m.is_guard and m.guard is not None}


def _judge_categories(catalog: Catalog) -> dict[str, frozenset[str]]:
    """Each guard model's own categories (lowercase), the only verdicts of it that count."""
    return {
        m.name: frozenset(c.lower() for c in m.guard.categories)
        for m in catalog.models()
        if m.is_guard and m.guard is not None and m.guard.categories
    }


def _objectives(catalog: Catalog) -> dict[str, Objective]:
    return {
        m.name: Objective(m.slo.ttft_p99.total_seconds(), m.slo.tpot_p99.total_seconds())
        for m in catalog.models()
    }


def scim_mounts(
    settings: Settings,
    store: Store,
    auth: AuthGate | None,
    config_dir: Path | None,
    vault: Mapping[str, str] | None = None,
) -> list[tuple[str, App]]:
    """The identity provider's provisioning on the client port: SCIM at /scim/v2 when
    `auth.scim` is enabled (with auth on: people exist only in the auth store)."""
    scim = settings.auth.scim
    if not (settings.auth.enabled and scim.enabled):
        if scim.enabled:
            log.warning("auth.scim is enabled but auth.enabled is off: SCIM is not served")
        return []

    async def person_changed(user_id: str, known: Scope | None) -> None:
        # This gateway honours or refuses the person's keys now; the others read the
        # change within auth.cache_ttl.
        if auth is None:
            return
        person = known
        if person is None:
            try:
                person = await store.tenancy.get("user", user_id)
            except StoreMissing:
                return
        auth.directory.apply((person,), (), time.time())

    app = ScimApp(
        store.provisioning,
        read_token(scim.token_file, base_dir=config_dir, vault=vault),
        on_person=person_changed,
    )
    log.info("SCIM provisioning served at %s", SCIM_PREFIX)
    return [(SCIM_PREFIX, app)]
