"""Where one replica of a model goes: filter the nodes that can carry a profile, then
score the ones that can (GPUStack's filter → score).

A model's profiles are tried by priority, highest first; a profile that names its card
by need is tried on each class meeting it, smallest card first. A node fits a profile
when it carries the profile's labels, has its engine installed (at the pinned
version), has enough free devices of the class or free cores, enough memory, disk
for weights it does not hold yet, and power left in every capped domain it is in. A
multi-node profile needs that many distinct nodes, all in one place at `keep_within`.

Among the nodes that fit, those already holding the weights come first (no download),
then the ones with the fewest replicas of the model (spread), then the most free
capacity; the node id breaks ties, so the same world always gives the same answer.
When nothing fits, `why_not` names the first check the closest nodes fail, in a
sentence for `ctl explain`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from llmgw.catalog import Model, Profile
from llmgw.control.decisions.capacity import Capacity, Holding, NodeCapacity, weights_entry
from llmgw.control.decisions.cluster import Assignment
from llmgw.hardware.facility import Level, parse_level

# The checks, in the order a node is judged by; a failure's number says how close the
# node came, and the closest node's failure is the one explained.
FITS = 0
NO_LABELS = 1
NO_ENGINE = 2
NO_DEVICES = 3
NO_CORES = 4
NO_MEMORY = 5
NO_DISK = 6
NO_POWER = 7


@dataclass(frozen=True, slots=True)
class Need:
    """One profile on one class, as placement checks it node by node."""

    model: str
    owner: str
    profile: Profile
    replica_profile: str
    """The name the replica is started under: the profile's, or `<profile>@<class>`
    for one that names its card by need."""
    gpu_class: str
    """'' for a CPU profile."""
    per_node: int
    nodes: int
    cores: int
    memory_gb: int
    disk_gb: int
    weights: str
    keep_within: Level | None

    @property
    def cards(self) -> int:
        return self.per_node * self.nodes


@dataclass(frozen=True, slots=True)
class Choice:
    """A placement found: the need it meets and what it takes on each node."""

    need: Need
    assignments: tuple[Assignment, ...]
    holds_weights: bool

    def holding(self, capacity: Capacity) -> Holding:
        """What the new replica will hold, to take it off the free capacity."""
        watts: dict[str, float] = {}
        disk = 0.0
        for a in self.assignments:
            node = capacity.nodes[a.node_id]
            watts[a.node_id] = capacity.estimate_watts(self.need.profile, node, a.devices, len(a.cpu_cores))
            if self.need.weights not in node.weights:
                disk = self.need.disk_gb
        return Holding(
            model=self.need.model,
            owner=self.need.owner,
            live=True,
            assignments=self.assignments,
            memory_gb=self.need.memory_gb,
            disk_gb=disk,
            cards=self.need.cards,
            watts_by_node=watts,
        )


def needs_of(model: Model, capacity: Capacity) -> list[Need]:
    """A model's profiles as needs, in the order they are tried: priority, then the
    order written; a profile naming its card by need once per class meeting it."""
    out: list[Need] = []
    ranked = sorted(enumerate(model.profiles), key=lambda ip: (-ip[1].priority, ip[0]))
    for _, p in ranked:
        if p.cpu_only:
            out.append(_need(model, p, "", p.name))
        elif p.gpu is None:
            out.append(_need(model, p, p.gpu_class, p.name))
        else:
            out.extend(_need(model, p, c, f"{p.name}@{c}") for c in p.classes_for(capacity.classes))
    return out


def _need(model: Model, p: Profile, gpu_class: str, name: str) -> Need:
    return Need(
        model=model.name,
        owner=model.owner,
        profile=p,
        replica_profile=name,
        gpu_class=gpu_class,
        per_node=p.gpus_per_node if gpu_class else 0,
        nodes=max(p.nodes, 1),
        cores=p.cpu_cores if not gpu_class else 0,
        memory_gb=p.min_memory_gb,
        disk_gb=p.min_disk_gb,
        weights=weights_entry(model.source_of(p)),
        keep_within=parse_level(p.keep_within) if p.keep_within else None,
    )


def check(capacity: Capacity, node: NodeCapacity, need: Need) -> int:
    """The first check `node` fails for one node's share of `need`, or FITS."""
    inv = node.inventory
    selector = need.profile.node_selector
    if selector and any(node.labels.get(k) != v for k, v in selector.items()):
        return NO_LABELS
    version = inv.engines.get(need.profile.engine)
    if version is None or not version.startswith(need.profile.engine_version):
        return NO_ENGINE
    if need.per_node > len(node.free.get(need.gpu_class, ())):
        return NO_DEVICES
    if need.cores > node.free_cores():
        return NO_CORES
    if node.memory_left_gb is not None and need.memory_gb > node.memory_left_gb:
        return NO_MEMORY
    holds = need.weights in node.weights
    if not holds and node.disk_left_gb is not None and need.disk_gb > node.disk_left_gb:
        return NO_DISK
    if capacity.facility is not None and capacity.facility.budgets and node.domains:
        watts = _share_watts(capacity, node, need)
        for domain in node.domains:
            left = capacity.domain_left_watts(domain)
            if left is not None and watts > left:
                return NO_POWER
    return FITS


def _share_watts(capacity: Capacity, node: NodeCapacity, need: Need) -> float:
    devices = node.free.get(need.gpu_class, [])[: need.per_node] if need.gpu_class else []
    return capacity.estimate_watts(need.profile, node, devices, need.cores)


def score(node: NodeCapacity, need: Need) -> tuple[int, int, int, str]:
    """Lower is better: fewest replicas of the model (so a node's loss never takes a
    model's every replica when another node could hold one), then weights already here
    (no fetch), then most free, then id."""
    free = node.free_devices() if need.gpu_class else node.free_cores()
    return (node.replicas[need.model], 0 if need.weights in node.weights else 1, -free, node.id)


def place(capacity: Capacity, need: Need) -> Choice | None:
    """The best nodes for one replica of `need`, or None when too few fit."""
    if need.nodes > 1:
        fitting = [
            node
            for node_id in capacity.candidates(need.gpu_class, need.profile.node_selector)
            if check(capacity, node := capacity.nodes[node_id], need) == FITS
        ]
        chosen = choose(fitting, need, lambda n: score(n, need))
    else:
        best = _best_single(capacity, need)
        chosen = [best] if best is not None else None
    if chosen is None:
        return None
    return Choice(need, assign(chosen, need), all(need.weights in n.weights for n in chosen))


def _best_single(capacity: Capacity, need: Need) -> NodeCapacity | None:
    """The node `score` ranks first among those that fit, found without scoring every
    node: the few holding the weights are judged first; otherwise the nodes with no
    replica of the model are walked most free first, and the first that fits is the
    best; only when none fits do the nodes already running the model come in."""

    def key(n: NodeCapacity) -> tuple[int, int, int, str]:
        return score(n, need)

    selector = need.profile.node_selector
    allowed = set(capacity.candidates(need.gpu_class, selector)) if selector else None
    holders = [
        node
        for node_id in capacity.by_weights.get(need.weights, ())
        if (allowed is None or node_id in allowed)
        and check(capacity, node := capacity.nodes[node_id], need) == FITS
    ]
    fresh_holders = [node for node in holders if node.replicas[need.model] == 0]
    if fresh_holders:
        return min(fresh_holders, key=key)
    crowded: list[NodeCapacity] = [node for node in holders if node.replicas[need.model] > 0]
    for node_id in capacity.most_free_first(need.gpu_class):
        if allowed is not None and node_id not in allowed:
            continue
        node = capacity.nodes[node_id]
        if need.weights in node.weights:
            continue  # judged above
        if node.replicas[need.model] > 0:
            if check(capacity, node, need) == FITS:
                crowded.append(node)
        elif check(capacity, node, need) == FITS:
            return node
    return min(crowded, key=key) if crowded else None


def choose(
    fitting: Sequence[NodeCapacity],
    need: Need,
    key: Callable[[NodeCapacity], tuple[object, ...]],
) -> list[NodeCapacity] | None:
    """`need.nodes` distinct nodes of `fitting`, best by `key`, all within one place at
    `keep_within` where the profile sets it (nodes without that label are passed over)."""
    if len(fitting) < need.nodes:
        return None
    if need.nodes == 1:
        return [min(fitting, key=key)]
    if need.keep_within is None:
        return sorted(fitting, key=key)[: need.nodes]
    label = need.keep_within.label
    groups: dict[str, list[NodeCapacity]] = {}
    for node in fitting:
        place_name = node.labels.get(label)
        if place_name:
            groups.setdefault(place_name, []).append(node)
    best: tuple[list[tuple[object, ...]], str] | None = None
    best_nodes: list[NodeCapacity] | None = None
    for place_name, members in groups.items():
        if len(members) < need.nodes:
            continue
        picked = sorted(members, key=key)[: need.nodes]
        rank = (sorted(key(n) for n in picked), place_name)
        if best is None or rank < best:
            best, best_nodes = rank, picked
    return best_nodes


def assign(nodes: Sequence[NodeCapacity], need: Need) -> tuple[Assignment, ...]:
    """What `need` takes on each of `nodes`: the first free devices and cores."""
    return tuple(
        Assignment(
            node_id=n.id,
            devices=tuple(n.free.get(need.gpu_class, [])[: need.per_node]) if need.gpu_class else (),
            cpu_cores=n.first_free_cores(need.cores) if need.cores else (),
        )
        for n in nodes
    )


def why_not(capacity: Capacity, need: Need) -> str:
    """Why `need` fits nowhere: the first check the closest nodes fail, naming one."""
    what = f"{need.per_node} free {need.gpu_class}" if need.gpu_class else "room for a CPU replica"
    if need.gpu_class and need.gpu_class not in capacity.by_class:
        return f"no ready node has {need.gpu_class}"
    ids = capacity.candidates(need.gpu_class, {})
    if not ids:
        return "no node is ready"
    results = [(check(capacity, capacity.nodes[i], need), i) for i in ids]
    fitting = [i for stage, i in results if stage == FITS]
    if fitting:
        where = f" within one {need.keep_within.value}" if need.keep_within is not None else ""
        return f"needs {need.nodes} nodes{where} with {what}; only {len(fitting)} fit ({_names(fitting)})"
    closest = max(stage for stage, _ in results)
    node = capacity.nodes[min(i for stage, i in results if stage == closest)]
    return _sentence(capacity, node, need, closest, what)


MISFIT_REASONS: frozenset[str] = frozenset(
    {
        "no_profile",
        "quota",
        "no_gpu_class",
        "no_ready_node",
        "too_few_nodes",
        "labels",
        "engine",
        "devices",
        "cores",
        "memory",
        "disk",
        "power",
    }
)
"""Every reason a model may go unplaced for, as `misfit_reason` names them: a fixed
set, since each is a label of `llmgw_control_placement_failures_total`."""

_STAGE_REASONS = {
    NO_LABELS: "labels",
    NO_ENGINE: "engine",
    NO_DEVICES: "devices",
    NO_CORES: "cores",
    NO_MEMORY: "memory",
    NO_DISK: "disk",
    NO_POWER: "power",
}


def misfit_reason(capacity: Capacity, need: Need) -> str:
    """`why_not` as a word of MISFIT_REASONS: the same first check the closest nodes fail."""
    if need.gpu_class and need.gpu_class not in capacity.by_class:
        return "no_gpu_class"
    ids = capacity.candidates(need.gpu_class, {})
    if not ids:
        return "no_ready_node"
    stages = [check(capacity, capacity.nodes[i], need) for i in ids]
    if FITS in stages:
        return "too_few_nodes"
    return _STAGE_REASONS[max(stages)]


def _sentence(capacity: Capacity, node: NodeCapacity, need: Need, stage: int, what: str) -> str:
    p = need.profile
    nodes = "no ready node" if not need.gpu_class else f"no ready node with {need.gpu_class}"
    if stage == NO_LABELS:
        labels = ", ".join(f"{k}={v}" for k, v in sorted(p.node_selector.items()))
        return f"{nodes} carries the labels {labels}"
    if stage == NO_ENGINE:
        has = node.inventory.engines.get(p.engine)
        pin = f" {p.engine_version}" if p.engine_version else ""
        seen = f"{node.id} has {has}" if has else f"{node.id} has none"
        return f"{nodes} has {p.engine}{pin} installed ({seen})"
    if stage == NO_DEVICES:
        return f"no ready node has {what} ({node.id} has {len(node.free.get(need.gpu_class, ()))} free)"
    if stage == NO_CORES:
        return f"no ready node has {need.cores} free cores ({node.id} has {node.free_cores()})"
    if stage == NO_MEMORY:
        left = node.memory_left_gb or 0
        return f"no node with {what} has {need.memory_gb} GB of memory left ({node.id} has {left:.0f} GB)"
    if stage == NO_DISK:
        left = node.disk_left_gb or 0
        return (
            f"no node with {what} holds the weights or has {need.disk_gb} GB of disk free"
            f" ({node.id} has {left:.0f} GB)"
        )
    watts = _share_watts(capacity, node, need)
    tight = [
        (spare, d)
        for d in node.domains
        if (spare := capacity.domain_left_watts(d)) is not None and watts > spare
    ]
    spare_watts, domain = min(tight) if tight else (0.0, None)
    return (
        f"no node with {what} has power to spare: a replica draws {watts:.0f} W and"
        f" {domain} has {max(spare_watts, 0):.0f} W left under its cap ({node.id})"
    )


def _names(ids: Sequence[str], most: int = 3) -> str:
    shown = ", ".join(ids[:most])
    return shown if len(ids) <= most else f"{shown} and {len(ids) - most} more"
