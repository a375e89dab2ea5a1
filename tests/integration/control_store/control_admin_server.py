"""A process serving the admin API with the control routes over a fake control plane
(one node, one replica of each model that has `min` above 0), a real store, catalog
store and leader lease: for the route and command-line tests.

    python control_admin_server.py STORE TOKEN_FILE PORT CONFIG

Prints "ready" once it listens and holds the lease; stops on SIGTERM.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from llmgw.admin import token as admin_token
from llmgw.admin.api import AdminApi
from llmgw.admin.control_routes import ControlRoutes
from llmgw.catalog import Catalog
from llmgw.config import load_settings
from llmgw.control.decisions.cluster import Assignment, NodeView, ReplicaView
from llmgw.http.http1_server import Http1Server
from llmgw.protocol.inventory import GPU, Inventory
from llmgw.store import Store
from llmgw.store.catalog_store import CatalogStore
from llmgw.store.lease import LeaderLease, LeaseTable

GB = 1024**3
SINCE = 1_800_000_000.0


class FakePlane:
    """The ControlView Protocol over fixed nodes; replicas follow the catalog in force."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        card = GPU(
            index=0, uuid="GPU-0", name="NVIDIA H100 80GB HBM3", gpu_class="h100-80g", memory_mib=81559
        )
        inventory = Inventory(
            hostname="gpu-01",
            llmgw_version="0.1.0",
            cpu_cores=32,
            memory_total_bytes=256 * GB,
            memory_available_bytes=200 * GB,
            weights_dir="/var/lib/llmgw/weights",
            disk_free_bytes=900 * GB,
            disk_total_bytes=2000 * GB,
            gpus=(card,),
            labels={"rack": "r1"},
        )
        self._nodes = [NodeView("node-1", inventory, "ready")]

    def nodes(self) -> Sequence[NodeView]:
        return self._nodes

    def replicas(self) -> Sequence[ReplicaView]:
        return [
            ReplicaView(
                id=f"{m.name}-0",
                model=m.name,
                profile=m.profiles[0].name,
                assignments=(Assignment("node-1", ("0",), (0, 1)),),
                phase="ready",
                since=SINCE,
            )
            for m in self.catalog.models()
            if m.scaling.min > 0 and m.profiles
        ]

    def explain(self, model: str) -> list[str]:
        placed = [r for r in self.replicas() if r.model == model]
        if not placed:
            return [f"{model}: no replica wanted (min 0)"]
        return [
            f"{model}: replica {r.id} runs on {', '.join(r.assignments[0].devices)} of node-1" for r in placed
        ]

    def replace_catalog(self, catalog: Catalog) -> None:
        self.catalog = catalog


async def main(location: str, token_file: str, port: int, config: str) -> None:
    settings = load_settings(Path(config), environ={})
    store = await Store.open(location)
    catalogs = CatalogStore(store, settings)
    plane = FakePlane((await catalogs.load()).catalog)
    lease = LeaderLease(LeaseTable(store.engine), settings.control.effective_lease_ttl)
    await lease.attempt()
    lease.start()
    token = admin_token.load_or_create(Path(token_file))
    app = AdminApi(settings, store, token, control=ControlRoutes(plane, catalogs, lease))
    server = Http1Server(app, "127.0.0.1", port)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await server.start()
    print("ready", flush=True)
    await stop.wait()
    await server.stop()
    await lease.close()
    await store.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]))
