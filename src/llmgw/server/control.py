"""Running the control plane inside `llmgw server`, as `Settings.control_plane_mode` says:
with `control.enabled`, with no static endpoints, or with any model that has profiles.

The plane itself (`llmgw.control.runtime.plane`) listens for agents and keeps the catalog's
models placed. What this module adds is what it needs from the rest of the server:
the router's seams (a request waiting for a model with no replica, when each model
was last asked for), and, with the server's store (`auth.store`, or its default the
server opens whenever the control plane runs, auth on or off), the
leader lease that lets several servers share one catalog, the runtime catalog kept in
the store, its watcher, the replica table through which servers that do not lead still
route (`llmgw.control.runtime.replica_sync`), the demand rows through which every server's
requests reach the leader's plan (`llmgw.control.runtime.demand_sync`), the owners' GPU quotas
set on the tenancy tree (`llmgw.control.runtime.quota_watch`), the revoked node certificates
and the certificates' ends (`llmgw.control.runtime.cert_watch`), and the `/api/control` routes.
Without a store (a caller that passes none) the plane runs on the configuration's
catalog alone, with no quotas, and leads on its own.

Every engine the plane starts demands an API key derived from the cluster's secret
(`llmgw.store.cluster_secret`): kept in the store where there is one, else in a file
beside the admin token, so a restarted server still reaches the engines it adopts.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from llmgw.admin.control_routes import ControlRoutes
from llmgw.catalog import Catalog
from llmgw.config import Settings
from llmgw.control.decisions.cluster import NodeView, ReplicaView
from llmgw.control.runtime.catalog_watch import CatalogWatcher
from llmgw.control.runtime.cert_watch import CertificateWatch, own_certificate
from llmgw.control.runtime.demand_sync import DemandSync
from llmgw.control.runtime.metrics import ControlCollector
from llmgw.control.runtime.plane import ControlPlane
from llmgw.control.runtime.quota_watch import QuotaWatch
from llmgw.control.runtime.replica_sync import ReplicaSync, follower_grace
from llmgw.control.tables.demand_table import DemandTable
from llmgw.control.tables.replica_table import ReplicaTable
from llmgw.core.events import NO_EVENTS, EventSink
from llmgw.secrets.seal import Sealer
from llmgw.server.endpoints_static import static_specs
from llmgw.server.gateway import Gateway
from llmgw.store import Store
from llmgw.store.catalog_store import CatalogStore
from llmgw.store.cluster_secret import file_secret, new_secret, secret_file, stored_secret
from llmgw.store.lease import LeaderLease, LeaseTable

log = logging.getLogger(__name__)


class ServedPlane:
    """The plane as the admin routes see it: a catalog change reaches the router too,
    so a model added at run time is both placed and routable."""

    def __init__(self, plane: ControlPlane, gateway: Gateway) -> None:
        self._plane = plane
        self._gateway = gateway

    @property
    def catalog(self) -> Catalog:
        return self._plane.catalog

    def replace_catalog(self, catalog: Catalog) -> None:
        self._gateway.replace_catalog(catalog)
        self._plane.replace_catalog(catalog)

    def nodes(self) -> list[NodeView]:
        return self._plane.nodes()

    def replicas(self) -> list[ReplicaView]:
        return self._plane.replicas()

    def explain(self, model: str) -> list[str]:
        return self._plane.explain(model)


@dataclass
class ControlRuntime:
    """The control plane and what runs beside it, stopped together."""

    plane: ControlPlane
    lease: LeaderLease | None = None
    watcher: CatalogWatcher | None = None
    routes: ControlRoutes | None = None
    replica_sync: ReplicaSync | None = None
    demand_sync: DemandSync | None = None
    quota_watch: QuotaWatch | None = None
    cert_watch: CertificateWatch | None = None

    async def close(self) -> None:
        if self.cert_watch is not None:
            await self.cert_watch.close()
        if self.watcher is not None:
            await self.watcher.close()
        if self.quota_watch is not None:
            await self.quota_watch.close()
        if self.replica_sync is not None:
            await self.replica_sync.close()
        if self.demand_sync is not None:
            await self.demand_sync.close()
        await self.plane.close()
        if self.lease is not None:
            await self.lease.close()  # handed back, so a standby takes over at once


async def engine_secret(
    settings: Settings, store: Store | None, config_dir: Path | None, sealer: Sealer | None = None
) -> bytes:
    """The cluster's secret the engine keys are derived from: the store's (the server
    always has one when its control plane runs), else, for a caller that passes none, the
    file beside the admin token. A caller with no place to keep it (no configuration
    file, no state directory, no admin token file) gets one for this run only."""
    if store is not None:
        return await stored_secret(store.engine, sealer=sealer)
    state_directory = os.environ.get("STATE_DIRECTORY")
    if config_dir is None and not state_directory and not settings.admin_token_file:
        return new_secret().encode()
    return file_secret(secret_file(settings.effective_admin_token_file(config_dir, state_directory)))


async def start_control(
    settings: Settings,
    gateway: Gateway,
    store: Store | None,
    config_dir: Path | None = None,
    sealer: Sealer | None = None,
    events: EventSink = NO_EVENTS,
) -> ControlRuntime | None:
    """In control-plane mode: the control plane, listening for agents, publishing into
    the gateway's endpoints and taking the router's seams; with a store, also the lease,
    the runtime catalog and its routes, and the demand and replica rows. None for a
    router-only configuration. `config_dir` is where the cluster secret's file lives
    without a store (beside the admin token's default)."""
    if not settings.control_plane_mode:
        return None
    secret = await engine_secret(settings, store, config_dir, sealer)
    lease: LeaderLease | None = None
    catalogs: CatalogStore | None = None
    if store is not None:
        lease = LeaderLease(LeaseTable(store.engine), settings.control.effective_lease_ttl)
        await lease.attempt()
        lease.start()
        catalogs = CatalogStore(store, settings)
    options: dict[str, object] = {"engine_secret": secret, "spans": gateway.spans, "events": events}
    if lease is not None:
        held = lease
        options |= {"is_leader": held.is_leader, "term": lambda: held.term}
    plane = ControlPlane.from_settings(
        settings, gateway.endpoints, static_specs(settings, gateway.vault_values), **options
    )
    gateway.registry.register(ControlCollector(plane))
    served = ServedPlane(plane, gateway)
    runtime = ControlRuntime(plane, lease)
    if catalogs is not None and lease is not None:
        # The first check applies what the store holds over the configuration's models.
        runtime.watcher = CatalogWatcher(catalogs, served.replace_catalog, settings.control.interval)
        await runtime.watcher.check()
        runtime.watcher.start()
        runtime.routes = ControlRoutes(served, catalogs, lease)
    if store is not None:
        # Read before the first pass, so nothing is placed past a quota already set.
        runtime.quota_watch = QuotaWatch(
            store.tenancy, plane.owners, plane.set_quotas, settings.control.interval
        )
        await runtime.quota_watch.check()
        runtime.quota_watch.start()
    gateway.flow.activator = plane
    plane.watch_requests(gateway.flow.last_asked, gateway.clock)
    plane.watch_load(gateway.flow.load)
    if plane.listener is not None and plane.listener.ssl is not None:
        # Revocations are read before agents are taken, so a revoked node is refused
        # from the first connection on.
        runtime.cert_watch = CertificateWatch(
            plane.hub,
            store.node_certs if store is not None else None,
            own=own_certificate(settings.agent_tls.cert_file),
            interval=settings.control.interval,
            events=events,
        )
        await runtime.cert_watch.check()
        runtime.cert_watch.start()
    await plane.start()
    if store is not None and lease is not None:
        # A change of belief is acted on at once rather than at the next interval.
        lease.listen(lambda _term: plane.wake())
        control = settings.control
        runtime.replica_sync = ReplicaSync(
            plane,
            ReplicaTable(store.engine, lease_name=lease.name),
            lease,
            interval=control.interval,
            grace=follower_grace(control.unreachable_after, lease.ttl),
            refresh=lease.ttl,
        )
        await runtime.replica_sync.step()
        runtime.replica_sync.start()
        runtime.demand_sync = DemandSync(
            plane, DemandTable(store.engine), lease, interval=control.interval, refresh=lease.ttl
        )
        plane.listen_activations(runtime.demand_sync.urge)
        await runtime.demand_sync.step()
        runtime.demand_sync.start()
    if lease is not None:
        log.info("control plane: %s the lease", "holding" if lease.is_leader() else "standing by for")
    return runtime
