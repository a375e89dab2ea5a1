"""One reconcile pass: the world as the agents report it, the plan for it, and the
orders and publications that carry the plan out.

A pass, every `control.interval` or at once when something calls for it (a request
waiting for a model, a replica failing):

1. Ends are settled: a replica that failed or crashed counts against its model's
   backoff and is stopped everywhere (which also acknowledges it, so its agent forgets
   it); one that stopped is acknowledged and forgotten.
2. Only the lease holder decides: `plan` (pure) says what to start and stop, within
   the owners' GPU quotas in force (`quotas`, read from the store by the server).
3. Starts of a model still in backoff are held back, with the stops that would have
   made room for them; the others become pending replicas at once, so the next pass
   counts them, and their orders go out as soon as nothing they wait for holds the
   node (a preempted replica must have let go of its cards first).
4. Stops withdraw the replica from the router first; the stop order follows once the
   gateway's requests on it have finished (`Endpoint.inflight` is 0), or the drain
   limit passed. A replica whose node is lost is only forgotten: nothing can reach it.

Adopted replicas (reported by an agent, not ordered by this process) are never
restarted: they are replicas like any other, kept while the plan wants them.

With a leader lease (`term` given), a pass does nothing at all unless this process
holds the lease, and every order it sends carries the term read at the top of the pass,
when it decided: an agent that has obeyed a later leader refuses it
(docs/control-plane-ha.md). A stop decided in one pass and sent after its drain keeps
the term of its decision.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Protocol
from zoneinfo import ZoneInfo

from llmgw.catalog import Catalog
from llmgw.config.control import FacilityPolicy
from llmgw.control.decisions.backoff import Backoff
from llmgw.control.decisions.cluster import ModelDemand
from llmgw.control.decisions.nodes import NodeRegistry
from llmgw.control.decisions.orders import start_order, stop_order
from llmgw.control.decisions.plan import Plan, Start, Stop, plan
from llmgw.control.decisions.publish import Publisher
from llmgw.control.decisions.quotas import NO_QUOTAS, Quotas
from llmgw.control.decisions.replicas import Part, ReplicaBook, ReplicaRecord
from llmgw.core.events import NO_EVENTS, EventSink
from llmgw.protocol.messages import ControlMessage, ReplicaStatus
from llmgw.router.endpoints import Endpoint

if TYPE_CHECKING:
    from llmgw.obs.spans import Spans

log = logging.getLogger(__name__)

AGENT_DRAIN = timedelta(seconds=10)
"""The drain the agent is told for a replica stopped with draining: the gateway has
already waited for its own requests, so this covers another gateway's (in HA)."""
_DRAIN_POLL_S = (0.02, 0.5)
"""A drain looks at the in-flight count this often, growing from the first to the second."""
_ID_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def new_replica_id(model: str) -> str:
    """A fresh replica id: the model's name made safe for a directory, and random hex."""
    stem = _ID_UNSAFE.sub("-", model).strip("-.")[:40] or "replica"
    return f"{stem}-{secrets.token_hex(4)}"


class Orders(Protocol):
    """Where orders go: the agent hub."""

    def connected(self, node_id: str) -> bool: ...

    async def send(self, node_id: str, message: ControlMessage) -> bool: ...


@dataclass(frozen=True)
class ReconcileRules:
    """The settings a pass reads."""

    tz: ZoneInfo
    port_range: tuple[int, int]
    drain_limit_s: float
    """Longest a stop waits for the gateway's requests on the replica to finish."""
    resend_after_s: float
    """An order a node has not acknowledged in a report for this long is sent again."""
    facility: FacilityPolicy | None = None


def held_by_backoff(decided: Plan, backoff: Backoff, now: float) -> tuple[list[Start], list[Stop], set[str]]:
    """The starts and stops of `decided` to carry out now: starts of models in backoff
    are held, and so are the preemptions that would only have made room for them.
    Also returns the models held."""
    held_models = {s.model for s in decided.starts if backoff.holds(s.model, now)}
    starts = [s for s in decided.starts if s.model not in held_models]
    spared = {victim for s in decided.starts if s.model in held_models for victim in s.preempts}
    stops = [s for s in decided.stops if not (s.reason == "preempted" and s.replica_id in spared)]
    return starts, stops, held_models


class Reconciler:
    """Carries out plans against the agents and the router."""

    def __init__(
        self,
        *,
        book: ReplicaBook,
        nodes: NodeRegistry,
        orders: Orders,
        publisher: Publisher,
        backoff: Backoff,
        rules: ReconcileRules,
        catalog: Callable[[], Catalog],
        demand: Callable[[], Mapping[str, ModelDemand]],
        api_key: Callable[[str], str],
        clock: Callable[[], float] = time.time,
        is_leader: Callable[[], bool] = lambda: True,
        term: Callable[[], int | None] | None = None,
        new_id: Callable[[str], str] = new_replica_id,
        quotas: Callable[[], Quotas] = lambda: NO_QUOTAS,
        spans: Spans | None = None,
        events: EventSink = NO_EVENTS,
    ) -> None:
        self.spans = spans
        self.book = book
        self.nodes = nodes
        self.orders = orders
        self.publisher = publisher
        self.backoff = backoff
        self.rules = rules
        self._catalog = catalog
        self._demand = demand
        self._api_key = api_key
        self._clock = clock
        self._is_leader = is_leader
        self._term = term
        self._new_id = new_id
        self._quotas = quotas
        self.events = events
        self._draining: dict[str, asyncio.Task[None]] = {}
        self.last_plan: Plan | None = None
        self.passes = 0
        # Passes that left a model below its floor, by model and why (one word of
        # placement.MISFIT_REASONS), for llmgw_control_placement_failures_total.
        self.placement_failures: dict[tuple[str, str], int] = {}

    # --- one pass -------------------------------------------------------------------

    def decision_term(self) -> int | None:
        """The term orders decided now carry: the lease's term, 0 without a lease, None
        where a lease is in use and this process does not hold it (nothing may be sent)."""
        if self._term is None:
            return 0
        return self._term()

    async def run_pass(self) -> Plan | None:
        """Settles ends, plans (on the leader only), orders and publishes. Returns the
        plan carried out, None where this process is not the leader. Without the lease
        (when one is in use) it does nothing: another server owns the agents and the
        router's set comes from the store. With tracing on, the pass is a span, and
        each placement decision in it a span below."""
        spans = self.spans
        if spans is None:
            return await self._pass()
        with spans.span("control.reconcile") as span:
            decided = await self._pass()
            span.set_attribute("llmgw.leader", decided is not None)
            if decided is not None:
                span.set_attribute("llmgw.starts", len(decided.starts))
                span.set_attribute("llmgw.stops", len(decided.stops))
            return decided

    def _decision(
        self, action: str, model: str, replica: str, outcome: str, reason: str, nodes: tuple[str, ...] = ()
    ) -> contextlib.AbstractContextManager[object]:
        """A span for one placement decision of a traced pass (nothing without tracing)."""
        if self.spans is None:
            return contextlib.nullcontext()
        attributes = {
            "llmgw.model": model,
            "llmgw.replica": replica,
            "llmgw.outcome": outcome,
            "llmgw.reason": reason,
            "llmgw.nodes": nodes,
        }
        return self.spans.span(f"control.{action}", attributes)

    async def _pass(self) -> Plan | None:
        term = self.decision_term()
        if term is None:
            return None
        now = self._clock()
        await self.settle_ends(now, term=term)
        decided: Plan | None = None
        if self._is_leader():
            catalog = self._catalog()
            quotas = self._quotas()
            decided = plan(
                catalog,
                self.nodes.views(),
                self.book.views(),
                self._demand(),
                now,
                tz=self.rules.tz,
                facility=self.rules.facility,
                new_id=self._new_id,
                owner_quotas=quotas.limits,
                owner_parents=quotas.parents,
            )
            starts, stops, held = held_by_backoff(decided, self.backoff, now)
            for model in sorted(held):
                with self._decision("place", model, "", "held", "not started again before its backoff ends"):
                    log.info("model %s: not started again before its backoff ends", model)
            for stop in stops:
                with self._decision("stop", stop.model, stop.replica_id, "stopping", stop.reason):
                    await self.stop(stop.replica_id, stop.reason, drain=stop.drain, term=term)
            for start in starts:
                nodes = tuple(a.node_id for a in start.assignments)
                with self._decision("place", start.model, start.replica_id, "ordered", start.reason, nodes):
                    self.book.ordered(
                        start.replica_id,
                        start.model,
                        start.profile,
                        start.assignments,
                        waits_for=start.preempts,
                    )
                log.info("replica %s of %s: %s", start.replica_id, start.model, start.reason)
            self.last_plan = decided
            for key in decided.unplaced.items():
                self.placement_failures[key] = self.placement_failures.get(key, 0) + 1
        await self.send_due(term=term)
        self.publish()
        self.passes += 1
        return decided

    async def settle_ends(self, now: float, *, term: int = 0) -> None:
        """Failed replicas count against their model; ended ones are acknowledged and
        forgotten, and a multi-node replica with a failed part is stopped everywhere."""
        for record in self.book.all():
            if record.phase == "failed" and not record.stop_reason and not (record.adopted and record.ended):
                parked_before = self.backoff.holds_longest(record.model)
                until = self.backoff.failed(record.model, now)
                self._report_failure(record, until - now, parked=not parked_before)
                log.warning(
                    "replica %s of %s failed (%s); the model is placed again in %.0fs",
                    record.id,
                    record.model,
                    record.detail or "no detail",
                    max(until - now, 0.0),
                )
            if record.ended:
                await self._acknowledge(record, term)
            elif record.phase == "failed":
                await self.stop(record.id, "failed", drain=False, term=term)

    def _report_failure(self, record: ReplicaRecord, retry_in_s: float, *, parked: bool) -> None:
        """`model.failed` for the replica; `model.parked` too when this failure is the
        one that brought its model to the longest backoff (`control.max_backoff`)."""
        data = {
            "model": record.model,
            "replica": record.id,
            "nodes": sorted({part.assignment.node_id for part in record.parts}),
            "detail": record.detail or "",
            "retry_in_s": round(max(retry_in_s, 0.0), 3),
        }
        self.events.emit("model.failed", record.id, data)
        if parked and self.backoff.holds_longest(record.model):
            self.events.emit("model.parked", f"{record.model}:{record.id}", data)

    async def _acknowledge(self, record: ReplicaRecord, term: int) -> None:
        for part in record.parts:
            await self.orders.send(part.assignment.node_id, stop_order(record.id, term=term))
        self.book.forget(record.id)

    # --- starting -------------------------------------------------------------------

    async def send_due(self, *, term: int = 0) -> None:
        """Sends every start order that may go now, and every stop order that is due,
        stamped `term`."""
        catalog = self._catalog()
        loading = self._hosts_loading()
        for record in self.book.all():
            if record.stop_reason:
                if not record.stop_sent and record.id not in self._draining:
                    await self._send_stop(record, drain=False, term=term)
                continue
            if record.adopted or any(self.book.get(w) is not None for w in record.waits_for):
                continue
            for part in record.parts:
                if part.start_sent_at is not None or part.report is not None:
                    continue
                if part.rank > 0 and not record.url:
                    continue  # the other ranks dial rank 0, which must have an address first
                host = self._shared_host(part.assignment.node_id)
                if host is not None:
                    if host in loading:
                        continue
                    loading.add(host)
                await self._send_start(catalog, record, part, term)

    def _shared_host(self, node_id: str) -> str | None:
        """The machine's name where several agents run on it (their inventories name the
        same host), else None."""
        node = self.nodes.get(node_id)
        if node is None:
            return None
        host = node.inventory.hostname
        sharing = sum(1 for view in self.nodes.views() if view.inventory.hostname == host)
        return host if sharing > 1 else None

    def _hosts_loading(self) -> set[str]:
        """Machines shared by several agents with an engine still loading on one of them.
        Each agent picks its engines' ports itself, lowest free first, and an engine binds
        its port only once loaded: two agents of one machine starting engines at once
        would pick the same port. So such a machine loads one engine at a time."""
        out: set[str] = set()
        for record in self.book.all():
            for part in record.parts:
                report = part.report
                loading = (report is None and part.start_sent_at is not None) or (
                    report is not None and report.state == ReplicaStatus.STARTING
                )
                host = self._shared_host(part.assignment.node_id) if loading else None
                if host is not None:
                    out.add(host)
        return out

    async def _send_start(self, catalog: Catalog, record: ReplicaRecord, part: Part, term: int) -> None:
        model = catalog.resolve(record.model)
        order = (
            None
            if model is None
            else start_order(
                model,
                record,
                part,
                api_key=self._api_key(record.id),
                port_range=self.rules.port_range,
                term=term,
            )
        )
        if order is None:
            log.warning(
                "replica %s: model %s or its profile %s is gone", record.id, record.model, record.profile
            )
            self.book.forget(record.id)
            return
        if await self.orders.send(part.assignment.node_id, order):
            part.start_sent_at = self._clock()

    # --- stopping -------------------------------------------------------------------

    async def stop(self, replica_id: str, reason: str, *, drain: bool, term: int = 0) -> None:
        """Withdraws the replica from the router now and stops it once drained, with an
        order stamped `term` (the decision's). A replica whose node is lost is forgotten
        instead: no order can reach it."""
        record = self.book.get(replica_id)
        if record is None or record.stop_reason:
            return
        endpoint = self.publisher.endpoint(replica_id)
        self.book.decided_stop(replica_id, reason)
        self.publish()
        if reason == "lost":
            self.book.forget(replica_id)
            log.warning("replica %s of %s written off: its node is lost", replica_id, record.model)
            return
        log.info("replica %s of %s stopping (%s)", replica_id, record.model, reason)
        if not drain or endpoint is None:
            await self._send_stop(record, drain=drain, term=term)
            return
        task = asyncio.create_task(
            self._drain_then_stop(record, endpoint, drain, term), name=f"drain-{replica_id}"
        )
        self._draining[replica_id] = task
        task.add_done_callback(lambda _: self._draining.pop(replica_id, None))

    async def _drain_then_stop(
        self, record: ReplicaRecord, endpoint: Endpoint, drain: bool, term: int
    ) -> None:
        await wait_drained(endpoint, self.rules.drain_limit_s)
        await self._send_stop(record, drain=drain, term=term)

    async def _send_stop(self, record: ReplicaRecord, *, drain: bool, term: int) -> None:
        if self.book.get(record.id) is not record:
            return
        started = any(p.start_sent_at is not None or p.report is not None for p in record.parts)
        if not started:
            # Never ordered (it waited on a preemption): there is nothing to stop.
            self.book.forget(record.id)
            return
        delivered = True
        for part in record.parts:
            order = stop_order(record.id, AGENT_DRAIN if drain else timedelta(0), term=term)
            delivered = await self.orders.send(part.assignment.node_id, order) and delivered
        record.stop_sent = delivered

    async def close(self) -> None:
        for task in list(self._draining.values()):
            task.cancel()
        for task in list(self._draining.values()):
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # --- the router -----------------------------------------------------------------

    def publish(self) -> list[str]:
        """Makes the router's set the static endpoints plus every routable replica."""
        return self.publisher.sync(self.book.all(), self._catalog(), self._api_key)


async def wait_drained(endpoint: Endpoint, limit_s: float) -> bool:
    """Waits until the gateway has no request in flight on `endpoint`, at most `limit_s`;
    returns whether it drained."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit_s
    pause = _DRAIN_POLL_S[0]
    while endpoint.inflight > 0:
        left = deadline - loop.time()
        if left <= 0:
            log.warning(
                "replica %s: %d request(s) still running after the drain limit",
                endpoint.id,
                endpoint.inflight,
            )
            return False
        await asyncio.sleep(min(pause, left))
        pause = min(pause * 2, _DRAIN_POLL_S[1])
    return True
