"""Running the control plane inside `llmgw server` (`control.enabled`).

The plane itself (`llmgw.control.plane`) listens for agents and keeps the catalog's
models placed. What this module adds is what it needs from the rest of the server:
the router's seams (a request waiting for a model with no replica, when each model
was last asked for), and, where the server has a store (auth on, `auth.store`), the
leader lease that lets several servers share one catalog, the runtime catalog kept in
the store, its watcher, the replica table through which servers that do not lead still
route (`llmgw.control.replica_sync`), and the `/api/control` routes. Without a store the
plane runs on the configuration's catalog alone and leads on its own.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from llmgw.catalog import Catalog
from llmgw.config import Settings
from llmgw.control.admin import ControlRoutes
from llmgw.control.catalog_store import CatalogStore
from llmgw.control.catalog_watch import CatalogWatcher
from llmgw.control.cluster import NodeView, ReplicaView
from llmgw.control.lease import LeaderLease, LeaseTable
from llmgw.control.plane import ControlPlane
from llmgw.control.replica_sync import ReplicaSync, follower_grace
from llmgw.control.replica_table import ReplicaTable
from llmgw.server.endpoints_static import static_specs
from llmgw.server.gateway import Gateway
from llmgw.store import Store

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

    async def close(self) -> None:
        if self.watcher is not None:
            await self.watcher.close()
        if self.replica_sync is not None:
            await self.replica_sync.close()
        await self.plane.close()
        if self.lease is not None:
            await self.lease.close()  # handed back, so a standby takes over at once


async def start_control(settings: Settings, gateway: Gateway, store: Store | None) -> ControlRuntime | None:
    """With `control.enabled`: the control plane, listening for agents, publishing into
    the gateway's endpoints and taking the router's seams; with a store, also the lease,
    the runtime catalog and its routes. None when the control plane is off."""
    if not settings.control.enabled:
        return None
    lease: LeaderLease | None = None
    catalogs: CatalogStore | None = None
    if store is not None:
        lease = LeaderLease(LeaseTable(store.engine), settings.control.effective_lease_ttl)
        await lease.attempt()
        lease.start()
        catalogs = CatalogStore(store, settings)
    options: dict[str, object] = {}
    if lease is not None:
        held = lease
        options = {"is_leader": held.is_leader, "term": lambda: held.term}
    plane = ControlPlane.from_settings(settings, gateway.endpoints, static_specs(settings), **options)
    served = ServedPlane(plane, gateway)
    runtime = ControlRuntime(plane, lease)
    if catalogs is not None and lease is not None:
        # The first check applies what the store holds over the configuration's models.
        runtime.watcher = CatalogWatcher(catalogs, served.replace_catalog, settings.control.interval)
        await runtime.watcher.check()
        runtime.watcher.start()
        runtime.routes = ControlRoutes(served, catalogs, lease)
    gateway.flow.activator = plane
    plane.watch_requests(gateway.flow.last_asked, gateway.clock)
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
    if lease is not None:
        log.info("control plane: %s the lease", "holding" if lease.is_leader() else "standing by for")
    return runtime
