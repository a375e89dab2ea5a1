"""The world as the control plane sees it on one pass: nodes with their inventories and
health, the replicas it knows of and where they sit, and what the router says of each
model's demand.

These are plain frozen values, built by the runtime from the agents' reports and the
store, and handed to the pure decisions (`plan`, `explain`); nothing here reads a clock
or a socket.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from llmgw.protocol.inventory import Inventory

NodeStatus = Literal["ready", "unreachable", "lost"]
"""ready: heartbeating. unreachable: silent past `unreachable_after`, its replicas kept
and still routed, nothing new placed there. lost: silent past `lost_after`, its
replicas written off and placed again elsewhere."""

ReplicaPhase = Literal["pending", "starting", "ready", "stopping", "stopped", "failed"]

LIVE_PHASES: frozenset[str] = frozenset({"pending", "starting", "ready"})
"""Phases that count towards a model's replicas: ordered, loading or serving."""

HOLDING_PHASES: frozenset[str] = frozenset({"pending", "starting", "ready", "stopping"})
"""Phases whose replica still holds its cards and cores: a stopping engine has not let
go of its memory yet, and a new one started on the same card would fail to load."""


@dataclass(frozen=True, slots=True)
class NodeView:
    """One registered node."""

    id: str
    inventory: Inventory
    status: NodeStatus
    cert_not_after: float | None = None
    """When the certificate the node last showed runs out (UNIX seconds); None without TLS."""


@dataclass(frozen=True, slots=True)
class Assignment:
    """What a replica holds on one node: devices by their visible id (a card's index or
    a MIG instance's UUID) and the CPU core numbers reserved for it."""

    node_id: str
    devices: tuple[str, ...] = ()
    cpu_cores: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """One replica the control plane ordered or adopted. `since` is the unix time it
    entered `phase`; a multi-node replica has one assignment per node, rank 0 first."""

    id: str
    model: str
    profile: str
    assignments: tuple[Assignment, ...]
    phase: ReplicaPhase
    since: float

    @property
    def live(self) -> bool:
        return self.phase in LIVE_PHASES

    @property
    def holds_capacity(self) -> bool:
        return self.phase in HOLDING_PHASES

    @property
    def node_ids(self) -> tuple[str, ...]:
        return tuple(a.node_id for a in self.assignments)


@dataclass(frozen=True, slots=True)
class ModelDemand:
    """What the router says of a model: a request waits for it now (the admission
    seam), when it was last asked for (unix time), and what load scaling makes of its
    load."""

    waiting: bool = False
    last_request_at: float | None = None
    load_target: int | None = None
    """The count load scaling holds the model at (`load_scaling`); None: it does not."""
    load_why: str = ""
    """Load scaling's sentence, with its figures, for `ctl explain`."""
