"""One reconcile decision: from the catalog, the nodes, the replicas and the demand, the
replicas to start and to stop, each with its reason, and per model the sentences that
say why (`llmgw ctl explain`).

In order: failed replicas are acknowledged, those on lost nodes written off, those of
models that left the catalog stopped; every model is brought within its floor and
ceiling, surplus newest first; then the models below their floor are placed, highest
class first, each taking capacity from strictly lower classes where nothing else fits.
A start, with or without preemption, is made only where its owner and every scope above
it that has a quota (`llmgw.control.decisions.quotas`) has room for its devices; a replica already
running over a quota lowered since is left alone (the quota holds back starts, it does
not stop what serves).
Free capacity is indexed only when something must be placed, so a pass with nothing to
change reads the replicas and the clock and no more.

Pure: the clock, the zone and the ids of new replicas are passed in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from types import MappingProxyType
from typing import Literal
from zoneinfo import ZoneInfo

from llmgw.catalog import Catalog, Model, class_rank
from llmgw.config.control import FacilityPolicy
from llmgw.control.decisions.capacity import Capacity
from llmgw.control.decisions.cluster import Assignment, ModelDemand, NodeView, ReplicaView
from llmgw.control.decisions.desired import DEFAULT_IDLE_TIMEOUT, Desired, desired, placeable
from llmgw.control.decisions.placement import Choice, Need, misfit_reason, needs_of, place, why_not
from llmgw.control.decisions.preemption import Victim, preempt
from llmgw.control.decisions.quotas import Quotas

StopReason = Literal["scale_down", "idle", "outside_schedule", "preempted", "removed", "lost", "failed"]

MAX_SENTENCES_PER_KIND = 6
"""Starts, stops or unplaceable profiles said one by one per model, the rest counted:
an explanation is read by a person."""

MAX_SENTENCES = 24
"""All a model's sentences, whatever their kind (a model with a hundred failed replicas
says so in a count, not a hundred lines)."""

_NO_DEMAND = ModelDemand()


@dataclass(frozen=True, slots=True)
class Start:
    """Start replica `replica_id` of `model` with `profile` on the assigned nodes, once
    the replicas in `preempts` are gone."""

    replica_id: str
    model: str
    profile: str
    assignments: tuple[Assignment, ...]
    preempts: tuple[str, ...] = ()
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Stop:
    """Stop a replica; `drain` withdraws it from the router and lets in-flight requests
    finish first (pointless for a replica that failed or whose node is gone)."""

    replica_id: str
    model: str
    reason: StopReason
    drain: bool


@dataclass(frozen=True, slots=True)
class Plan:
    starts: tuple[Start, ...]
    stops: tuple[Stop, ...]
    explanations: Mapping[str, tuple[str, ...]]
    wanted: Mapping[str, int]
    """Each placed model's floor: the live replicas it should have now."""
    unplaced: Mapping[str, str]
    """The models left below their floor, each with why in one word of
    `placement.MISFIT_REASONS` (for the metrics; `explanations` says it in full)."""

    @property
    def empty(self) -> bool:
        return not self.starts and not self.stops


def plan(
    catalog: Catalog,
    nodes: Sequence[NodeView],
    replicas: Sequence[ReplicaView],
    demand: Mapping[str, ModelDemand],
    now: float,
    *,
    tz: ZoneInfo,
    facility: FacilityPolicy | None = None,
    new_id: Callable[[str], str],
    default_idle_timeout: timedelta = DEFAULT_IDLE_TIMEOUT,
    owner_quotas: Mapping[str, int] = MappingProxyType({}),
    owner_parents: Mapping[str, str] = MappingProxyType({}),
) -> Plan:
    """What to start and stop now. `owner_quotas` caps the cards the models of each
    scope (`org:ID`, `team:ID`, `project:ID`) may hold together, its whole subtree's;
    `owner_parents` says which scope each is under (`project:p` to `team:t`, `team:t`
    to `org:o`), so a project's model counts against its team's and org's quotas too."""
    quotas = Quotas(owner_quotas, owner_parents)
    return _Pass(
        catalog, nodes, replicas, demand, now, tz, facility, new_id, default_idle_timeout, quotas
    ).run()


def explain(
    catalog: Catalog,
    nodes: Sequence[NodeView],
    replicas: Sequence[ReplicaView],
    demand: Mapping[str, ModelDemand],
    now: float,
    *,
    tz: ZoneInfo,
    model: str,
    facility: FacilityPolicy | None = None,
    default_idle_timeout: timedelta = DEFAULT_IDLE_TIMEOUT,
    owner_quotas: Mapping[str, int] = MappingProxyType({}),
    owner_parents: Mapping[str, str] = MappingProxyType({}),
) -> list[str]:
    """What `llmgw ctl explain MODEL` prints: the count the model should have and why,
    where its replicas are, and what the next pass would do for it and why."""
    found = catalog.resolve(model)
    if found is None:
        return [f"model {model!r} is not in the catalog"]
    decided = plan(
        catalog,
        nodes,
        replicas,
        demand,
        now,
        tz=tz,
        facility=facility,
        new_id=lambda name: "a new replica",
        default_idle_timeout=default_idle_timeout,
        owner_quotas=owner_quotas,
        owner_parents=owner_parents,
    )
    lines = list(decided.explanations.get(found.name, ()))
    for r in sorted(replicas, key=lambda r: r.id):
        if r.model == found.name:
            lines.append(f"replica {r.id} ({r.profile}) is {r.phase} on {', '.join(r.node_ids) or 'no node'}")
    return lines


@dataclass
class _Pass:
    catalog: Catalog
    nodes: Sequence[NodeView]
    replicas: Sequence[ReplicaView]
    demand: Mapping[str, ModelDemand]
    now: float
    tz: ZoneInfo
    facility: FacilityPolicy | None
    new_id: Callable[[str], str]
    default_idle_timeout: timedelta
    quotas: Quotas
    starts: list[Start] = field(default_factory=list)
    stops: list[Stop] = field(default_factory=list)
    said: dict[str, list[str]] = field(default_factory=dict)
    live: dict[str, list[ReplicaView]] = field(default_factory=dict)
    wanted: dict[str, Desired] = field(default_factory=dict)
    unsaid: dict[str, int] = field(default_factory=dict)
    unplaced: dict[str, str] = field(default_factory=dict)

    def run(self) -> Plan:
        served = self._served()
        self._sort_replicas(served)
        for m in served.values():
            self._bound(m)
        short = [m for m in served.values() if len(self.live[m.name]) < self.wanted[m.name].floor]
        if short:
            self._place(short)
        for model, count in self.unsaid.items():
            self.said[model].append(f"and {count} more decisions")
        return Plan(
            starts=tuple(self.starts),
            stops=tuple(self.stops),
            explanations=MappingProxyType({k: tuple(v) for k, v in self.said.items()}),
            wanted=MappingProxyType({name: want.floor for name, want in self.wanted.items()}),
            unplaced=MappingProxyType(dict(self.unplaced)),
        )

    def _say(self, model: str, sentence: str) -> None:
        lines = self.said.setdefault(model, [])
        if len(lines) < MAX_SENTENCES:
            lines.append(sentence)
        else:
            self.unsaid[model] = self.unsaid.get(model, 0) + 1

    def _served(self) -> dict[str, Model]:
        """The models replicas are placed for, by name, in declaration order. Members of
        a shared ComfyUI environment are served by its hidden entry's replicas."""
        models = self.catalog.models()
        shared = {member.name for m in models for member in m.shared_members()}
        return {m.name: m for m in models if placeable(m) and m.name not in shared}

    def _demand(self, m: Model) -> ModelDemand:
        members = m.shared_members()
        if not members:
            return self.demand.get(m.name, _NO_DEMAND)
        # A shared replica is asked for whenever any of its members is.
        seen = [self.demand.get(member.name, _NO_DEMAND) for member in members]
        lasts = [d.last_request_at for d in seen if d.last_request_at is not None]
        return ModelDemand(waiting=any(d.waiting for d in seen), last_request_at=max(lasts, default=None))

    def _sort_replicas(self, served: Mapping[str, Model]) -> None:
        status = {n.id: n.status for n in self.nodes}
        for name in served:
            self.live[name] = []
        for r in self.replicas:
            if r.phase == "failed":
                self._stop(r, "failed", drain=False, why=f"replica {r.id} failed; the agent forgets it")
            elif not r.live:
                continue
            elif any(status.get(node_id, "lost") == "lost" for node_id in r.node_ids) or not r.assignments:
                gone = [n for n in r.node_ids if status.get(n, "lost") == "lost"]
                where = ", ".join(gone) or "no node"
                self._stop(r, "lost", drain=False, why=f"replica {r.id} is written off: {where} is lost")
            elif r.model not in served:
                self._stop(
                    r, "removed", drain=True, why=f"replica {r.id} stops: the model is no longer served"
                )
            else:
                self.live[r.model].append(r)

    def _stop(self, r: ReplicaView, reason: StopReason, *, drain: bool, why: str) -> None:
        self.stops.append(Stop(r.id, r.model, reason, drain))
        self._say(r.model, why)

    def _bound(self, m: Model) -> None:
        """Says what the model should have, and stops its surplus, newest first."""
        want = desired(m, self._demand(m), self.now, self.tz, self.default_idle_timeout)
        self.wanted[m.name] = want
        live = self.live[m.name]
        self._say(m.name, f"wants {_count(want)}, from {want.why}; {len(live)} live")
        excess = len(live) - want.ceiling
        if excess <= 0:
            return
        newest = sorted(live, key=lambda r: (r.since, r.id), reverse=True)[:excess]
        for i, r in enumerate(newest):
            self.stops.append(Stop(r.id, m.name, want.surplus_reason, drain=True))
            if i < MAX_SENTENCES_PER_KIND:
                self._say(m.name, f"stopping {r.id} ({want.surplus_reason}): newest above the ceiling")
        if excess > MAX_SENTENCES_PER_KIND:
            self._say(m.name, f"and {excess - MAX_SENTENCES_PER_KIND} more stopped")
        gone = {r.id for r in newest}
        self.live[m.name] = [r for r in live if r.id not in gone]

    def _place(self, short: Sequence[Model]) -> None:
        capacity = Capacity(self.nodes, self.facility, self.quotas.parents)
        victims: dict[str, list[Victim]] = {}
        stopping = {s.replica_id for s in self.stops if s.reason in ("lost", "failed")}
        kept = {r.id for live in self.live.values() for r in live}
        for r in self.replicas:
            if not r.holds_capacity or r.id in stopping:
                continue
            held = capacity.holding(r, self.catalog)
            capacity.hold(held)
            model = self.catalog.resolve(r.model)
            if model is not None and r.id in kept:
                victim = Victim(r.id, class_rank(model.effective_class), r.since, held)
                for node_id in r.node_ids:
                    victims.setdefault(node_id, []).append(victim)
        order = {name: i for i, name in enumerate(self.wanted)}
        # Highest class first: what it takes, a lower class must then do without.
        for m in sorted(short, key=lambda m: (-class_rank(m.effective_class), order[m.name])):
            self._fill(m, capacity, victims)

    def _fill(self, m: Model, capacity: Capacity, victims: dict[str, list[Victim]]) -> None:
        needs = needs_of(m, capacity)
        rank = class_rank(m.effective_class)
        started = 0
        while len(self.live[m.name]) + started < self.wanted[m.name].floor:
            choice, preempted = self._find(m, needs, rank, capacity, victims)
            if choice is None:
                self._explain_misfit(m, needs, capacity)
                return
            capacity.hold(choice.holding(capacity))
            replica_id = self.new_id(m.name)
            have = len(self.live[m.name]) + started
            reason = _start_reason(choice, have, self.wanted[m.name].floor, preempted)
            self.starts.append(
                Start(
                    replica_id=replica_id,
                    model=m.name,
                    profile=choice.need.replica_profile,
                    assignments=choice.assignments,
                    preempts=tuple(v.replica_id for v in preempted),
                    reason=reason,
                )
            )
            if started < MAX_SENTENCES_PER_KIND:
                self._say(m.name, f"starting {replica_id}: {reason}")
            started += 1

    def _find(
        self,
        m: Model,
        needs: Sequence[Need],
        rank: int,
        capacity: Capacity,
        victims: dict[str, list[Victim]],
    ) -> tuple[Choice | None, tuple[Victim, ...]]:
        # Quotas are checked before preemption too: taking a lower class's cards never
        # buys an owner more than its quota.
        allowed = [n for n in needs if self.quotas.allows(n.owner, n.cards, capacity.owner_cards)]
        for need in allowed:
            choice = place(capacity, need)
            if choice is not None:
                return choice, ()
        for need in allowed:
            found = preempt(capacity, need, rank, victims)
            if found is None:
                continue
            for v in found.victims:
                capacity.release(v.holding)
                for node_id in {a.node_id for a in v.holding.assignments}:
                    victims[node_id] = [x for x in victims.get(node_id, []) if x.replica_id != v.replica_id]
                self.stops.append(Stop(v.replica_id, v.holding.model, "preempted", drain=True))
                self.live[v.holding.model] = [
                    r for r in self.live.get(v.holding.model, []) if r.id != v.replica_id
                ]
                self._say(v.holding.model, f"stopping {v.replica_id} (preempted): model {m.name} outranks it")
            return found.choice, found.victims
        return None, ()

    def _explain_misfit(self, m: Model, needs: Sequence[Need], capacity: Capacity) -> None:
        if not needs:
            self.unplaced[m.name] = "no_profile"
            classes = ", ".join(capacity.classes) or "none"
            self._say(
                m.name, f"cannot place a replica: no profile's card is on a ready node (classes: {classes})"
            )
            return
        first = needs[0]
        if self.quotas.blocked(first.owner, first.cards, capacity.owner_cards) is not None:
            self.unplaced[m.name] = "quota"
        else:
            self.unplaced[m.name] = misfit_reason(capacity, first)
        for need in needs[:MAX_SENTENCES_PER_KIND]:
            blocked = self.quotas.blocked(need.owner, need.cards, capacity.owner_cards)
            reason = why_not(capacity, need) if blocked is None else blocked.sentence(need.owner)
            self._say(m.name, f"profile {need.replica_profile}: {reason}")
        if len(needs) > MAX_SENTENCES_PER_KIND:
            self._say(m.name, f"and {len(needs) - MAX_SENTENCES_PER_KIND} more profiles do not fit either")


def _count(want: Desired) -> str:
    if want.floor == want.ceiling:
        return f"{want.floor} replica{'s' if want.floor != 1 else ''}"
    return f"{want.floor} to {want.ceiling} replicas"


def _start_reason(choice: Choice, have: int, floor: int, preempted: Sequence[Victim]) -> str:
    nodes = ", ".join(a.node_id for a in choice.assignments)
    why = f"{have} of {floor} wanted; profile {choice.need.replica_profile} on {nodes}"
    if choice.holds_weights:
        why += ", which holds the weights"
    if preempted:
        why += f", preempting {', '.join(v.replica_id for v in preempted)}"
    return why
