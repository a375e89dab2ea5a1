"""Small worlds for the control plane's runtime: a clock a test moves by hand, node
inventories, catalogs of sim models, a real endpoint registry to publish into, and an
order sink standing in for the agent hub that records what was sent, in order, next to
what was published (so a test can read the order of withdrawals and stops)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any
from zoneinfo import ZoneInfo

from llmgw.catalog import Catalog, Model
from llmgw.control.decisions.backoff import Backoff
from llmgw.control.decisions.nodes import NodeRegistry
from llmgw.control.decisions.publish import Publisher
from llmgw.control.decisions.replicas import ReplicaBook
from llmgw.control.runtime.reconciler import Reconciler, ReconcileRules
from llmgw.protocol.inventory import Inventory
from llmgw.protocol.messages import ControlMessage, ReplicaState, ReplicaStatus, StartReplica, StopReplica
from llmgw.router.endpoints import EndpointRegistry
from llmgw.upstream import UpstreamClient

GB = 1 << 30
START = 1_750_000_000.0
"""The unix time every test starts at."""


@dataclass
class Clock:
    now: float = START

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def inventory(cores: int = 8, labels: Mapping[str, str] | None = None) -> Inventory:
    return Inventory(
        hostname="node",
        llmgw_version="0.1.0",
        cpu_cores=cores,
        memory_total_bytes=64 * GB,
        memory_available_bytes=64 * GB,
        weights_dir="/tmp/weights",
        disk_free_bytes=100 * GB,
        disk_total_bytes=200 * GB,
        labels=dict(labels or {}),
        engines={"sim": "0.1.0"},
    )


def sim_model(name: str, *, cores: int = 0, **fields: Any) -> dict[str, Any]:
    """A sim model on CPUs; `min`/`max`/`idle_timeout` go into scaling."""
    scaling = {k: fields.pop(k) for k in ("min", "max", "idle_timeout") if k in fields}
    return {
        "name": name,
        "source": f"sim/{name}",
        "profiles": [{"name": "sim", "engine": "sim", "cpu_cores": cores}],
        "scaling": scaling,
        **fields,
    }


def catalog(*definitions: Mapping[str, Any]) -> Catalog:
    return Catalog.build([Model.model_validate(d) for d in definitions])


@dataclass
class Wire:
    """The agent hub's place in unit tests: connected nodes, and everything sent and
    published, in one log."""

    connected_nodes: set[str] = field(default_factory=set)
    log: list[tuple[str, str, str]] = field(default_factory=list)
    """(what, node or '', replica id or the published ids)."""
    sent: list[tuple[str, ControlMessage]] = field(default_factory=list)

    def connected(self, node_id: str) -> bool:
        return node_id in self.connected_nodes

    async def send(self, node_id: str, message: ControlMessage) -> bool:
        if node_id not in self.connected_nodes:
            return False
        self.sent.append((node_id, message))
        if isinstance(message, StartReplica | StopReplica):
            self.log.append((message.type, node_id, message.replica_id))
        return True

    def starts(self) -> list[tuple[str, StartReplica]]:
        return [(n, m) for n, m in self.sent if isinstance(m, StartReplica)]

    def stops(self) -> list[tuple[str, StopReplica]]:
        return [(n, m) for n, m in self.sent if isinstance(m, StopReplica)]


class LoggedRegistry(EndpointRegistry):
    """The router's registry, noting each publication in the wire's log."""

    def __init__(self, wire: Wire) -> None:
        super().__init__(UpstreamClient(), failure_threshold=1, cooldown=10.0)
        self.wire = wire

    def publish(self, specs: Any) -> list[str]:
        specs = list(specs)
        self.wire.log.append(("publish", "", ",".join(sorted(s.id for s in specs))))
        return super().publish(specs)


@dataclass
class World:
    clock: Clock
    wire: Wire
    nodes: NodeRegistry
    book: ReplicaBook
    registry: LoggedRegistry
    reconciler: Reconciler
    catalog_box: list[Catalog]

    def join(self, node_id: str, inv: Inventory | None = None) -> None:
        self.nodes.registered(node_id, inv or inventory())
        self.wire.connected_nodes.add(node_id)

    def tick(self, seconds: float) -> None:
        """Time passes; every connected node heartbeats meanwhile."""
        self.clock.advance(seconds)
        for node_id in self.wire.connected_nodes:
            self.nodes.heard(node_id)

    def report(self, node_id: str, replica_id: str, state: ReplicaStatus, **fields: Any) -> None:
        record = self.book.get(replica_id)
        model = record.model if record is not None else fields.pop("model", "")
        values: dict[str, Any] = {"url": "http://127.0.0.1:21000", "port": 21000, "pid": 4242}
        values.update(fields)
        self.book.reported(
            node_id, ReplicaState(replica_id=replica_id, model=model, profile="sim", state=state, **values)
        )


def world(
    cat: Catalog,
    *,
    demand: Mapping[str, Any] | None = None,
    drain_limit_s: float = 5.0,
    base_backoff: timedelta = timedelta(seconds=10),
    max_backoff: timedelta = timedelta(seconds=80),
    term: Callable[[], int | None] | None = None,
) -> World:
    clock = Clock()
    wire = Wire()
    nodes = NodeRegistry(unreachable_after_s=15, lost_after_s=60, clock=clock)
    book = ReplicaBook(clock)
    registry = LoggedRegistry(wire)
    box = [cat]
    ids = iter(f"r{i}" for i in range(1, 1000))
    reconciler = Reconciler(
        book=book,
        nodes=nodes,
        orders=wire,
        publisher=Publisher(registry),
        backoff=Backoff(base_backoff.total_seconds(), max_backoff.total_seconds()),
        rules=ReconcileRules(
            tz=ZoneInfo("UTC"), port_range=(21000, 21999), drain_limit_s=drain_limit_s, resend_after_s=2.0
        ),
        catalog=lambda: box[0],
        demand=lambda: dict(demand or {}),
        api_key=lambda rid: f"key-{rid}",
        clock=clock,
        term=term,
        new_id=lambda model: next(ids),
    )
    return World(clock, wire, nodes, book, registry, reconciler, box)
