"""Taking capacity from a lower class when a model of a higher one fits nowhere.

Only replicas of a strictly lower class are candidates, and on each node they are given
up lowest class first and, within a class, newest first (the newest has served the
least and holds the least warm cache), until the need fits there. Among the nodes that
can be freed so, the fewest victims win, then the lowest classes, then the newest;
the node id breaks ties. The caller asks only for a model below its floor, so a
preemption never buys a replica beyond what is desired.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from llmgw.control.decisions.capacity import Capacity, Holding, NodeCapacity
from llmgw.control.decisions.placement import FITS, NO_ENGINE, NO_LABELS, Choice, Need, assign, check, choose


@dataclass(frozen=True, slots=True)
class Victim:
    """A live replica that may be stopped for a higher class."""

    replica_id: str
    rank: int
    since: float
    holding: Holding


@dataclass(frozen=True, slots=True)
class Preemption:
    choice: Choice
    victims: tuple[Victim, ...]


def preempt(
    capacity: Capacity,
    need: Need,
    rank: int,
    victims_by_node: Mapping[str, Sequence[Victim]],
) -> Preemption | None:
    """The cheapest set of lower-class replicas whose capacity lets `need` fit, and the
    placement it makes; None when even that does not fit. Leaves `capacity` unchanged."""
    options: dict[str, tuple[Victim, ...]] = {}
    for node_id in capacity.candidates(need.gpu_class, need.profile.node_selector):
        node = capacity.nodes[node_id]
        if check(capacity, node, need) in (NO_LABELS, NO_ENGINE):
            continue  # no victim gives a node labels or an engine
        freed = _free_until_fits(capacity, node, need, rank, victims_by_node.get(node_id, ()))
        if freed is not None:
            options[node_id] = freed

    def cost(node: NodeCapacity) -> tuple[object, ...]:
        victims = options[node.id]
        return (
            len(victims),
            sum(v.rank for v in victims),
            -max((v.since for v in victims), default=0.0),
            node.id,
        )

    chosen = choose([capacity.nodes[i] for i in options], need, cost)
    if chosen is None:
        return None
    victims: dict[str, Victim] = {}
    for node in chosen:
        for v in options[node.id]:
            victims.setdefault(v.replica_id, v)
    if not victims:
        return None  # it fits without anyone leaving: placement's job, not this
    # The victims go first, so the devices and cores handed out are the ones they free.
    for v in victims.values():
        capacity.release(v.holding)
    try:
        found = Choice(need, assign(chosen, need), all(need.weights in n.weights for n in chosen))
    finally:
        for v in victims.values():
            capacity.hold(v.holding)
    return Preemption(found, tuple(victims.values()))


def _free_until_fits(
    capacity: Capacity, node: NodeCapacity, need: Need, rank: int, candidates: Sequence[Victim]
) -> tuple[Victim, ...] | None:
    """Victims on `node`, lowest class and newest first, until `need` fits there."""
    order = sorted((v for v in candidates if v.rank < rank), key=lambda v: (v.rank, -v.since, v.replica_id))
    taken: list[Victim] = []
    fits = check(capacity, node, need) == FITS
    try:
        for v in order:
            if fits:
                break
            capacity.release(v.holding)
            taken.append(v)
            fits = check(capacity, node, need) == FITS
    finally:
        for v in taken:
            capacity.hold(v.holding)
    return tuple(taken) if fits else None
