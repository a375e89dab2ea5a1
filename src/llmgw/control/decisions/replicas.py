"""The replicas the control plane knows: those it ordered and those agents reported
(adopted), with each node's latest report and the phase they add up to.

A replica is one `replica_id` across one or more nodes (a multi-node replica has one
part per node, rank 0 first). Its phase is computed from the parts' reports and from
what the control plane itself decided, never stored apart from them:

- ordered and not yet reported: `pending`;
- being withdrawn and drained, or told to stop: `stopping`, so that placement neither
  counts it as serving nor gives its cards to someone else before they are free;
- otherwise what the agents say, the worst part deciding (one failed part fails the
  replica, all parts must be ready for it to be ready).

Every agent message about a replica lands here; the reconciler reads the book on each
pass and the publisher reads which replicas are ready.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from llmgw.control.decisions.cluster import Assignment, ReplicaPhase, ReplicaView
from llmgw.protocol.messages import ReplicaState, ReplicaStatus

_ENDED = (ReplicaStatus.STOPPED, ReplicaStatus.FAILED, ReplicaStatus.CRASHED)


@dataclass
class Part:
    """A replica's share of one node, and what that node last said of it."""

    assignment: Assignment
    rank: int = 0
    report: ReplicaState | None = None
    start_sent_at: float | None = None
    """When the start order last went to the node (unix time); None for an adopted part."""


@dataclass
class ReplicaRecord:
    """One replica, ordered or adopted."""

    id: str
    model: str
    profile: str
    parts: list[Part]
    since: float
    """Unix time its phase last changed."""
    adopted: bool = False
    stop_reason: str = ""
    """Set once the control plane decided to stop it (scale_down, idle, lost, ...)."""
    stop_sent: bool = False
    waits_for: tuple[str, ...] = ()
    """Replicas it preempts: its start is sent only once they have let go of the node."""
    detail: str = ""
    phase: ReplicaPhase = "pending"

    @property
    def node_ids(self) -> tuple[str, ...]:
        return tuple(p.assignment.node_id for p in self.parts)

    @property
    def url(self) -> str:
        """Where rank 0 serves the API, once it reported an address."""
        head = self.parts[0].report if self.parts else None
        return head.url if head is not None else ""

    @property
    def ended(self) -> bool:
        """Every part's process is gone (stopped, failed or crashed)."""
        return all(p.report is not None and p.report.state in _ENDED for p in self.parts)

    @property
    def failed(self) -> bool:
        """It ended, or is ending, without having been asked to."""
        return any(
            p.report is not None and p.report.state in (ReplicaStatus.FAILED, ReplicaStatus.CRASHED)
            for p in self.parts
        )

    def part_on(self, node_id: str) -> Part | None:
        for part in self.parts:
            if part.assignment.node_id == node_id:
                return part
        return None

    def view(self) -> ReplicaView:
        return ReplicaView(
            id=self.id,
            model=self.model,
            profile=self.profile,
            assignments=tuple(p.assignment for p in self.parts),
            phase=self.phase,
            since=self.since,
        )


def phase_of(record: ReplicaRecord) -> ReplicaPhase:
    """The phase a replica's parts and the control plane's decisions add up to."""
    reports = [p.report for p in record.parts]
    states = {r.state for r in reports if r is not None}
    if states & {ReplicaStatus.FAILED, ReplicaStatus.CRASHED}:
        return "failed"
    if reports and all(r is not None and r.state == ReplicaStatus.STOPPED for r in reports):
        return "stopped"
    if record.stop_reason or ReplicaStatus.STOPPING in states:
        return "stopping"
    if reports and all(r is not None and r.state == ReplicaStatus.READY for r in reports):
        return "ready"
    if states:
        return "starting"
    return "pending"


@dataclass
class Change:
    """What one report did to the book, for whoever reacts at once (publication)."""

    replica_id: str
    before: ReplicaPhase
    after: ReplicaPhase
    adopted: bool = False


class ReplicaBook:
    """Every replica the control plane knows, by id."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._records: dict[str, ReplicaRecord] = {}

    def __len__(self) -> int:
        return len(self._records)

    def get(self, replica_id: str) -> ReplicaRecord | None:
        return self._records.get(replica_id)

    def all(self) -> list[ReplicaRecord]:
        return list(self._records.values())

    def views(self) -> list[ReplicaView]:
        return [r.view() for r in sorted(self._records.values(), key=lambda r: r.id)]

    def on_node(self, node_id: str) -> list[ReplicaRecord]:
        return [r for r in self._records.values() if r.part_on(node_id) is not None]

    def ordered(
        self,
        replica_id: str,
        model: str,
        profile: str,
        assignments: Iterable[Assignment],
        *,
        waits_for: tuple[str, ...] = (),
    ) -> ReplicaRecord:
        """A replica the control plane decided to start: pending until reported."""
        parts = [Part(assignment, rank) for rank, assignment in enumerate(assignments)]
        record = ReplicaRecord(replica_id, model, profile, parts, self._clock(), waits_for=waits_for)
        self._records[replica_id] = record
        return record

    def forget(self, replica_id: str) -> ReplicaRecord | None:
        return self._records.pop(replica_id, None)

    def clear(self) -> None:
        """Forgets every replica: a control plane that lost the lease no longer hears
        of them, and learns them afresh from the agents if it leads again."""
        self._records.clear()

    def decided_stop(self, replica_id: str, reason: str) -> Change | None:
        record = self._records.get(replica_id)
        if record is None or record.stop_reason:
            return None
        record.stop_reason = reason
        return self._settle(record)

    def reported(self, node_id: str, state: ReplicaState) -> Change | None:
        """An agent's word on one replica (a `replica_state`, or an entry of `register` or a
        heartbeat). A replica this book does not know is adopted as the agent has it."""
        record = self._records.get(state.replica_id)
        if record is None:
            record = self._adopt(node_id, state)
            change = self._settle(record)
            return Change(record.id, "pending", record.phase, adopted=True) if change is None else change
        part = record.part_on(node_id)
        if part is None:
            # The same id on another node than the one it was ordered to: not ours to
            # merge; the agent's own report of it wins for that node.
            part = Part(Assignment(node_id), rank=len(record.parts))
            record.parts.append(part)
        part.report = state
        if state.detail:
            record.detail = state.detail
        return self._settle(record)

    def missing(self, node_id: str, listed: set[str], *, resend_after_s: float) -> list[ReplicaRecord]:
        """Replicas this book places on `node_id` that a full report from it (a heartbeat,
        a registration) did not list. A part the node had reported is gone from it (its
        agent lost its records): it is failed here. A part never reported whose order
        went out more than `resend_after_s` ago is returned, to be ordered again (orders
        are idempotent)."""
        now = self._clock()
        resend: list[ReplicaRecord] = []
        for record in self.on_node(node_id):
            if record.id in listed:
                continue
            part = record.part_on(node_id)
            assert part is not None
            if part.report is not None and part.report.state not in _ENDED:
                part.report = part.report.model_copy(
                    update={"state": ReplicaStatus.FAILED, "detail": "its node no longer reports it"}
                )
                self._settle(record)
            elif (
                part.report is None
                and part.start_sent_at is not None
                and now - part.start_sent_at >= resend_after_s
            ):
                resend.append(record)
        return resend

    def _adopt(self, node_id: str, state: ReplicaState) -> ReplicaRecord:
        # The protocol does not repeat which cards an engine holds; the reconciler fills
        # the assignment in from the profile when it can (see `reconciler.adopted_assignment`).
        record = ReplicaRecord(
            state.replica_id,
            state.model,
            state.profile,
            [Part(Assignment(node_id), report=state)],
            self._clock(),
            adopted=True,
            detail=state.detail,
        )
        self._records[record.id] = record
        return record

    def _settle(self, record: ReplicaRecord) -> Change | None:
        phase = phase_of(record)
        if phase == record.phase:
            return None
        before = record.phase
        record.phase = phase
        record.since = self._clock()
        return Change(record.id, before, phase)
