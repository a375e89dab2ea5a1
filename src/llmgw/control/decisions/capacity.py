"""What is free where, for one placement pass: each ready node's free devices by
class, free cores, memory and disk left, the weights it holds, the replicas of each
model on it, the power drawn in every capped domain, and the devices the models of each
part of the tenancy tree hold (for owners' quotas).

Built once per pass from the nodes and the replicas that hold capacity, indexed by GPU
class and by label so a profile looks only at the nodes that could carry it, and then
updated as the pass decides: a start takes what it was given (`hold`), a preemption
gives back what its victims held (`release`). Nothing here decides; `placement` does.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from llmgw.catalog import Catalog, Profile
from llmgw.config.control import FacilityPolicy
from llmgw.control.decisions.cluster import Assignment, NodeView, ReplicaView
from llmgw.control.decisions.quotas import chain
from llmgw.hardware.facility import Domain, domains_of
from llmgw.protocol.inventory import Inventory

_GB = 1 << 30
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def weights_entry(source: str, weights_dir: str = "") -> str:
    """The name the weights of `source` have directly under a node's weights directory,
    as the agent's fetcher lays them out: `owner--name` for a repository or a file in
    one, the URL's host and directories joined the same way, the entry itself for a
    path inside the weights directory, and a file's own name for any other path."""
    text = source.strip()
    if not text:
        return ""
    if text.startswith(("http://", "https://")):
        rest = text.split("://", 1)[1]
        host, _, path = rest.partition("/")
        parts = [host.replace(":", "_"), *path.split("/")[:-1]]
        if "huggingface.co/" in text or "hf.co/" in text:
            # A /resolve/ URL goes through the mirror, landing as the repository does.
            parts = path.split("/")[:2]
        return "--".join(_UNSAFE.sub("_", p) for p in parts if p and p not in (".", ".."))
    if text.startswith("/"):
        root = weights_dir.rstrip("/") + "/"
        if weights_dir and text.startswith(root):
            return text[len(root) :].split("/", 1)[0]
        return text.rstrip("/").rsplit("/", 1)[-1]
    parts = [p for p in text.removeprefix("hf:").strip("/").split("/") if p][:2]
    return "--".join(_UNSAFE.sub("_", p) for p in parts if p not in (".", ".."))


@dataclass(slots=True)
class NodeCapacity:
    """One node's free capacity, changed as the pass places and preempts."""

    id: str
    inventory: Inventory
    ready: bool
    free: dict[str, list[str]]
    """Free devices by class, each list in the node's own order."""
    device_class: dict[str, str]
    card_watts: dict[str, float]
    """What each device draws at most: its card's power limit (shared among a card's
    MIG instances), or the facility's per-GPU figure where the card reports none."""
    cores_taken: set[int]
    memory_left_gb: float | None
    """None where the node reports no memory: unknown is not full."""
    disk_left_gb: float | None
    weights: frozenset[str]
    domains: tuple[Domain, ...]
    replicas: Counter[str] = field(default_factory=Counter)
    """Live replicas of each model with a part here."""

    @property
    def labels(self) -> dict[str, str]:
        return self.inventory.labels

    def free_devices(self) -> int:
        return sum(len(ids) for ids in self.free.values())

    def free_cores(self) -> int:
        return max(self.inventory.cpu_cores - len(self.cores_taken), 0)

    def first_free_cores(self, count: int) -> tuple[int, ...]:
        """The lowest `count` core numbers nobody holds; numbers count the cores the
        agent may use, 0 first."""
        out: list[int] = []
        for core in range(self.inventory.cpu_cores):
            if len(out) == count:
                break
            if core not in self.cores_taken:
                out.append(core)
        return tuple(out)


@dataclass(frozen=True, slots=True)
class Holding:
    """What one replica holds, by node: what `release` gives back and `hold` takes."""

    model: str
    owner: str
    live: bool
    assignments: tuple[Assignment, ...]
    memory_gb: float
    disk_gb: float
    """Space a download still in progress will fill (0 for a replica already running)."""
    cards: int
    watts_by_node: Mapping[str, float]


class Capacity:
    """The cluster's free capacity during one pass, indexed for placement."""

    def __init__(
        self,
        nodes: Sequence[NodeView],
        facility: FacilityPolicy | None,
        owner_parents: Mapping[str, str] | None = None,
    ) -> None:
        self.facility = facility
        self.owner_parents: Mapping[str, str] = owner_parents or {}
        self.nodes: dict[str, NodeCapacity] = {}
        self.by_class: dict[str, list[str]] = {}
        self.ready_ids: list[str] = []
        self.by_label: dict[tuple[str, str], set[str]] = {}
        self.domain_watts: dict[Domain, float] = {}
        self.owner_cards: Counter[str] = Counter()
        """Devices held by each scope's models, its whole subtree's: a card a project's
        model holds counts for the project, its team and its org (`owner_parents`)."""
        self.by_weights: dict[str, set[str]] = {}
        # Ready nodes by class ('' for every ready node, as CPU profiles see them) and by
        # how much they have free: devices of any class, or cores for ''. Placement walks
        # them most free first and stops at the first that fits, instead of scoring all.
        self._by_free: dict[str, dict[int, set[str]]] = {}
        for view in sorted(nodes, key=lambda n: n.id):
            if view.status == "lost":
                continue
            node = _node_capacity(view, facility)
            self.nodes[view.id] = node
            if facility is not None and facility.node_watts > 0:
                for domain in node.domains:
                    self.domain_watts[domain] = self.domain_watts.get(domain, 0.0) + facility.node_watts
            if not node.ready:
                continue
            self.ready_ids.append(view.id)
            for gpu_class in node.free:
                self.by_class.setdefault(gpu_class, []).append(view.id)
            for item in node.labels.items():
                self.by_label.setdefault(item, set()).add(view.id)
            for name in node.weights:
                self.by_weights.setdefault(name, set()).add(view.id)
            self._index(node, add=True)

    def _index(self, node: NodeCapacity, *, add: bool) -> None:
        if not node.ready:
            return
        devices, cores = node.free_devices(), node.free_cores()
        for gpu_class, amount in ((c, devices) for c in node.free):
            self._bucket(gpu_class, amount, node.id, add)
        self._bucket("", cores, node.id, add)

    def _bucket(self, gpu_class: str, amount: int, node_id: str, add: bool) -> None:
        buckets = self._by_free.setdefault(gpu_class, {})
        if add:
            buckets.setdefault(amount, set()).add(node_id)
            return
        bucket = buckets.get(amount)
        if bucket is not None:
            bucket.discard(node_id)
            if not bucket:
                del buckets[amount]

    def most_free_first(self, gpu_class: str) -> Iterator[str]:
        """Ready nodes with devices of `gpu_class` ('' for every ready node), most free
        first (devices of any class, or cores for ''), then by id. Not to be held
        across a change of capacity."""
        buckets = self._by_free.get(gpu_class, {})
        for amount in sorted(buckets, reverse=True):
            yield from sorted(buckets[amount])

    @property
    def classes(self) -> list[str]:
        """Every device class on a ready node."""
        return sorted(self.by_class)

    def candidates(self, gpu_class: str, selector: Mapping[str, str]) -> list[str]:
        """Ready nodes with devices of `gpu_class` ('' for any node) carrying every
        label of `selector`, by id."""
        ids = self.by_class.get(gpu_class, []) if gpu_class else self.ready_ids
        if not selector:
            return ids
        allowed: set[str] | None = None
        for item in selector.items():
            found = self.by_label.get(item, set())
            allowed = found if allowed is None else allowed & found
        return [i for i in ids if i in (allowed or set())]

    def domain_left_watts(self, domain: Domain) -> float | None:
        """What a capped domain can still draw under its cap and margin; None uncapped."""
        if self.facility is None:
            return None
        budget = self.facility.budgets.get(domain)
        if budget is None:
            return None
        usable = budget.cap_watts * (1 - self.facility.margin) - budget.other_watts
        return usable - self.domain_watts.get(domain, 0.0)

    def estimate_watts(
        self, profile: Profile, node: NodeCapacity, devices: Iterable[str], cores: int
    ) -> float:
        """One node's share of a replica's draw: the profile's own figure split over its
        nodes, or its devices at their limits and its reserved cores at the facility's
        figure."""
        if profile.power_watts > 0:
            return profile.power_watts / max(profile.nodes, 1)
        watts = sum(node.card_watts.get(d, 0.0) for d in devices)
        if self.facility is not None:
            watts += cores * self.facility.cpu_core_watts
        return watts

    def holding(self, replica: ReplicaView, catalog: Catalog) -> Holding:
        """What an existing replica holds, read from its assignments and its profile."""
        model = catalog.resolve(replica.model)
        profile = model.profile_by_name(replica.profile) if model is not None else None
        watts: dict[str, float] = {}
        for a in replica.assignments:
            node = self.nodes.get(a.node_id)
            if node is not None and profile is not None:
                watts[a.node_id] = self.estimate_watts(profile, node, a.devices, len(a.cpu_cores))
        return Holding(
            model=replica.model,
            owner=model.owner if model is not None else "",
            live=replica.live,
            assignments=replica.assignments,
            memory_gb=profile.min_memory_gb if profile is not None else 0,
            disk_gb=0,
            cards=sum(len(a.devices) for a in replica.assignments),
            watts_by_node=watts,
        )

    def hold(self, h: Holding) -> None:
        """Takes what `h` holds off the free capacity."""
        self._apply(h, taking=True)

    def release(self, h: Holding) -> None:
        """Gives what `h` held back to the free capacity."""
        self._apply(h, taking=False)

    def _apply(self, h: Holding, *, taking: bool) -> None:
        sign = 1 if taking else -1
        for scope in chain(h.owner, self.owner_parents):
            self.owner_cards[scope] += sign * h.cards
        for a in h.assignments:
            node = self.nodes.get(a.node_id)
            if node is None:
                continue
            self._index(node, add=False)
            self._take_or_give(node, h, a, taking)
            self._index(node, add=True)

    def _take_or_give(self, node: NodeCapacity, h: Holding, a: Assignment, taking: bool) -> None:
        sign = 1 if taking else -1
        for device in a.devices:
            gpu_class = node.device_class.get(device)
            if gpu_class is None:
                continue
            free = node.free[gpu_class]
            if taking and device in free:
                free.remove(device)
            elif not taking and device not in free:
                free.append(device)
                free.sort(key=list(node.device_class).index)
        if taking:
            node.cores_taken.update(a.cpu_cores)
        else:
            node.cores_taken.difference_update(a.cpu_cores)
        if node.memory_left_gb is not None:
            node.memory_left_gb -= sign * h.memory_gb
        if node.disk_left_gb is not None:
            node.disk_left_gb -= sign * h.disk_gb
        if h.live:
            node.replicas[h.model] += sign
        watts = h.watts_by_node.get(a.node_id, 0.0)
        for domain in node.domains:
            self.domain_watts[domain] = self.domain_watts.get(domain, 0.0) + sign * watts


def _node_capacity(view: NodeView, facility: FacilityPolicy | None) -> NodeCapacity:
    inv = view.inventory
    free: dict[str, list[str]] = {}
    device_class: dict[str, str] = {}
    card_watts: dict[str, float] = {}
    default_watts = facility.gpu_watts if facility is not None else 0.0
    for gpu in inv.gpus:
        limit = gpu.power_limit_watts if gpu.power_limit_watts is not None else default_watts
        if not gpu.mig_enabled:
            ids: list[tuple[str, str]] = [(str(gpu.index), gpu.gpu_class)]
        else:
            ids = [(mig.uuid, mig.gpu_class) for mig in gpu.mig_devices]
        for visible_id, gpu_class in ids:
            free.setdefault(gpu_class, []).append(visible_id)
            device_class[visible_id] = gpu_class
            card_watts[visible_id] = limit / max(len(ids), 1)
    return NodeCapacity(
        id=view.id,
        inventory=inv,
        ready=view.status == "ready",
        free=free,
        device_class=device_class,
        card_watts=card_watts,
        cores_taken=set(),
        memory_left_gb=inv.memory_total_bytes / _GB if inv.memory_total_bytes > 0 else None,
        disk_left_gb=inv.disk_free_bytes / _GB if inv.disk_free_bytes > 0 else None,
        weights=frozenset(w.name for w in inv.weights),
        # Where a node is matters to placement only through the power caps on its domains.
        domains=tuple(domains_of(inv.labels)) if facility is not None and facility.budgets else (),
    )
