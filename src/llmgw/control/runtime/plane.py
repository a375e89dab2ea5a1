"""The control plane as the server runs it: the agent port, the nodes and replicas the
agents report, the reconcile loop, and the router's two seams (requests waiting for a
model that has no replica, and when each model was last asked for).

`ControlPlane` is created by the server beside the gateway, given the gateway's
endpoint registry to publish into, and passed to the gateway's flow control as its
`Activator`. `activate(model)` wakes the loop at once, so a request waiting for an
on-demand model costs a pass, not an interval; a replica turning ready is published the
moment its agent says so, which releases the waiting request.

The admin API reads it through `nodes()`, `replicas()`, `explain(model)` and `catalog`,
and changes the catalog with `replace_catalog`; the owners' GPU quotas come from the
store through `set_quotas` (`llmgw.control.runtime.quota_watch`); `is_leader` (the store's
lease) decides whether this process places work or only follows.

Leadership is read at the top of every pass. A plane that gains it takes agents and
gives them `unreachable_after` from that moment to come back before it places anything
(`settled`), so what they still run is adopted, not started twice; until then it keeps
routing the set it followed. A plane that loses it stops at once: it sends every agent
away (`not_leader`), forgets its nodes and replicas, and routes by the set the new
leader writes to the store (`llmgw.control.runtime.replica_sync`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from llmgw.catalog import Catalog
from llmgw.config import Settings
from llmgw.config.control import FacilityPolicy
from llmgw.control.decisions import plan as planning
from llmgw.control.decisions.adoption import adopted_assignment
from llmgw.control.decisions.backoff import Backoff
from llmgw.control.decisions.cluster import ModelDemand, NodeView, ReplicaView
from llmgw.control.decisions.demand import Asked, ServerDemand, merge_demand
from llmgw.control.decisions.desired import desired, placeable
from llmgw.control.decisions.load_scaling import LoadReading, ScalePolicy, ScaleState, scale_step
from llmgw.control.decisions.nodes import NodeRegistry
from llmgw.control.decisions.orders import engine_key
from llmgw.control.decisions.publish import Publisher
from llmgw.control.decisions.quotas import NO_QUOTAS, Quotas
from llmgw.control.decisions.replicas import Change, ReplicaBook
from llmgw.control.runtime.firewall_state import state_path, write_state
from llmgw.control.runtime.hub import AgentHub, firewall_message
from llmgw.control.runtime.node_events import NodeWatch
from llmgw.control.runtime.reconciler import Reconciler, ReconcileRules
from llmgw.core.events import NO_EVENTS, EventSink
from llmgw.protocol.messages import (
    STALE_TERM,
    Error,
    FetchProgress,
    Heartbeat,
    NodeSettings,
    Register,
    ReplicaState,
    ReplicaStatus,
)
from llmgw.protocol.tls import AgentListener, agent_listener
from llmgw.router.endpoints import EndpointRegistry, EndpointSpec
from llmgw.router.metrics import Histogram

if TYPE_CHECKING:
    from llmgw.obs.spans import Spans

log = logging.getLogger(__name__)

DRAIN_LIMIT = timedelta(minutes=2)
"""Longest a replica being stopped waits for the gateway's requests on it to finish."""
MAX_HEARTBEAT_INTERVAL = timedelta(seconds=5)


def local_zone(name: str) -> ZoneInfo:
    """`control.timezone`, or the host's zone (TZ, then /etc/localtime), else UTC."""
    candidates = [name] if name else [os.environ.get("TZ", "").lstrip(":"), _etc_localtime()]
    for candidate in candidates:
        if not candidate:
            continue
        with contextlib.suppress(ZoneInfoNotFoundError, ValueError):
            return ZoneInfo(candidate)
    return ZoneInfo("UTC")


def _etc_localtime() -> str:
    try:
        target = str(Path("/etc/localtime").resolve())
    except OSError:
        return ""
    _, sep, zone = target.partition("/zoneinfo/")
    return zone if sep else ""


def heartbeat_interval(unreachable_after: timedelta) -> timedelta:
    """Three heartbeats fit in `unreachable_after`, so one lost frame never makes a node
    unreachable; at most every 5 s."""
    return min(unreachable_after / 3, MAX_HEARTBEAT_INTERVAL)


@dataclass(frozen=True)
class PlaneConfig:
    """The control plane's settings, in the units it works in."""

    interval: timedelta
    base_backoff: timedelta
    max_backoff: timedelta
    unreachable_after: timedelta
    lost_after: timedelta
    node_settings: NodeSettings
    tz: ZoneInfo
    activation_wait: timedelta
    facility: FacilityPolicy | None = None
    drain_limit: timedelta = DRAIN_LIMIT
    scale: ScalePolicy = field(default_factory=ScalePolicy)

    @classmethod
    def from_settings(cls, settings: Settings) -> PlaneConfig:
        control = settings.control
        return cls(
            interval=control.interval,
            base_backoff=control.base_backoff,
            max_backoff=control.max_backoff,
            unreachable_after=control.unreachable_after,
            lost_after=control.lost_after,
            node_settings=NodeSettings(
                firewall=settings.firewall.enabled,
                firewall_networks=tuple(str(n) for n in settings.firewall_networks),
                mirror_url=settings.offline.mirror if settings.offline.enabled else "",
                port_range=control.port_range,
                mgmt_interface=control.mgmt_interface,
            ),
            tz=local_zone(control.timezone),
            activation_wait=settings.router.effective_activation_wait,
            facility=settings.facility.policy() if settings.facility.budgets else None,
            scale=ScalePolicy(
                up_at=control.scale_up_at,
                up_after=control.scale_up_after.total_seconds(),
                down_at=control.scale_down_at,
                down_after=control.scale_down_after.total_seconds(),
            ),
        )


class ControlPlane:
    """Nodes, replicas, the reconcile loop and the agent port, for one server."""

    def __init__(
        self,
        config: PlaneConfig,
        catalog: Catalog,
        endpoints: EndpointRegistry,
        *,
        static: Sequence[EndpointSpec] = (),
        listener: AgentListener | None = None,
        clock: Callable[[], float] = time.time,
        is_leader: Callable[[], bool] = lambda: True,
        term: Callable[[], int | None] | None = None,
        engine_secret: bytes = b"",
        timer: Callable[[], float] = time.perf_counter,
        spans: Spans | None = None,
        events: EventSink = NO_EVENTS,
    ) -> None:
        self.config = config
        self._timer = timer
        self.pass_seconds = Histogram()
        """How long each reconcile pass took (llmgw_control_reconcile_duration_seconds)."""
        self._catalog = catalog
        self.listener = listener
        self.is_leader = is_leader
        self._clock = clock
        self._secret = engine_secret
        self._quotas: Quotas = NO_QUOTAS
        self.registry = NodeRegistry(
            unreachable_after_s=config.unreachable_after.total_seconds(),
            lost_after_s=config.lost_after.total_seconds(),
            clock=clock,
        )
        self.book = ReplicaBook(clock)
        self.node_watch = NodeWatch(self.registry, events)
        self.hub = AgentHub(
            self,
            settings=config.node_settings,
            heartbeat_interval=heartbeat_interval(config.unreachable_after),
            require_cert_name=listener is not None and listener.ssl is not None,
            accepting=self._takes_agents,
        )
        self.publisher = Publisher(endpoints, static)
        self.reconciler = Reconciler(
            book=self.book,
            nodes=self.registry,
            orders=self.hub,
            publisher=self.publisher,
            backoff=Backoff(config.base_backoff.total_seconds(), config.max_backoff.total_seconds()),
            rules=ReconcileRules(
                tz=config.tz,
                port_range=config.node_settings.port_range,
                drain_limit_s=config.drain_limit.total_seconds(),
                resend_after_s=2 * heartbeat_interval(config.unreachable_after).total_seconds(),
                facility=config.facility,
            ),
            catalog=lambda: self._catalog,
            demand=self.demand,
            api_key=self.api_key,
            clock=clock,
            # Read through self: the store's lease is set on the plane after it is built.
            is_leader=lambda: self.is_leader() and self.settled(),
            term=term,
            quotas=lambda: self._quotas,
            spans=spans,
            events=events,
        )
        self._started_at: float | None = None
        self._leading = False
        """Leadership as the last pass saw it; `_led_since` is when it was gained."""
        self._led_since: float | None = None
        self._wake = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        self._waiting: dict[str, float] = {}
        self._adopted_at: dict[str, float] = {}
        self._asked: Mapping[str, float] = {}
        self._asked_clock: Callable[[], float] = time.monotonic
        self._others: tuple[ServerDemand, ...] = ()
        self._others_silent_after = 0.0
        self._on_activate: list[Callable[[str], None]] = []
        self._load: Callable[[str], tuple[float | None, int, bool]] | None = None
        self._scale: dict[str, ScaleState] = {}
        self._scale_why: dict[str, str] = {}

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        endpoints: EndpointRegistry,
        static: Sequence[EndpointSpec] = (),
        **options: object,
    ) -> ControlPlane:
        listener = agent_listener(settings.agent_listen, settings.agent_tls, settings.agent_insecure)
        return cls(
            PlaneConfig.from_settings(settings),
            settings.catalog(),
            endpoints,
            static=static,
            listener=listener,
            **options,  # type: ignore[arg-type]
        )

    def _takes_agents(self) -> bool:
        # Read through self, like the reconciler's is_leader: agents come to the leader
        # only, and the store's lease may be set on the plane after it is built.
        return self.is_leader()

    # --- running --------------------------------------------------------------------

    @property
    def agent_port(self) -> int:
        """The port agents dial (the bound one, where the settings said 0)."""
        return self.hub.port

    async def start(self) -> None:
        """Listens for agents and starts the reconcile loop."""
        if self.listener is not None:
            await self.hub.start(self.listener.host, self.listener.port, self.listener.ssl)
            log.info("control plane: agents connect to %s:%d", self.listener.host, self.hub.port)
        if write_state(state_path(), firewall_message(self.hub.settings)):
            log.info("control plane: firewall state written to %s", state_path())
        self._started_at = self._clock()
        await self.observe_leadership()
        self.reconciler.publish()
        self._loop_task = asyncio.create_task(self._run(), name="control-plane")

    def settled(self) -> bool:
        """Whether the agents have had time to reconnect since this plane started and
        since it last became the leader. Until then nothing is placed: a control plane
        that placed at once would start a second copy of every replica whose agent had
        not reconnected yet, instead of adopting it. `unreachable_after` is the wait,
        since a node silent that long would count as unreachable anyway."""
        if self._started_at is None or not self._leading or self._led_since is None:
            return False
        since = max(self._started_at, self._led_since)
        return self._clock() - since >= self.config.unreachable_after.total_seconds()

    async def observe_leadership(self) -> None:
        """Acts on a change of leadership since the last look: gaining it starts the wait
        for agents, losing it sends them away and forgets what they said."""
        leading = self.is_leader()
        if leading and not self._leading:
            self._led_since = self._clock()
            self._leading = True
            log.info("control plane: leading; agents have %s to reconnect", self.config.unreachable_after)
        elif not leading and self._leading:
            self._leading = False
            await self._step_down()
        if self._leading and self.publisher.inherited and self.settled():
            # Agents had their time: what they did not report is no longer vouched for.
            self.publisher.settle()

    async def _step_down(self) -> None:
        log.warning("control plane: no longer the leader; sending agents to the one that leads")
        # Keeps routing what it routed until the store says what the new leader runs.
        self.publisher.follow(self.publisher.replicas)
        await self.reconciler.close()
        await self.hub.dismiss_all()
        self.book.clear()
        self.registry.clear()
        self._adopted_at.clear()
        self._others = ()

    @property
    def leading(self) -> bool:
        """Whether the last look found this plane leading (`observe_leadership`)."""
        return self._leading

    async def close(self) -> None:
        """Stops the loop and closes the agent port; every engine keeps running, for the
        next control plane to adopt."""
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
            self._loop_task = None
        await self.reconciler.close()
        await self.hub.close()

    async def _run(self) -> None:
        interval = self.config.interval.total_seconds()
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), interval)
            self._wake.clear()
            try:
                await self.run_pass()
            except Exception:  # the loop must outlive one bad pass; logged with its cause
                log.exception("control plane: a reconcile pass failed")

    def wake(self) -> None:
        """Runs a pass now rather than at the next interval."""
        self._wake.set()

    async def run_pass(self) -> None:
        """One pass: leadership looked at, then the reconciler's pass; timed, failed or not."""
        began = self._timer()
        try:
            await self.observe_leadership()
            self.step_scaling()
            await self.reconciler.run_pass()
            self.node_watch.look()
        finally:
            self.pass_seconds.observe(self._timer() - began)

    # --- the router's seams ---------------------------------------------------------

    def activate(self, model: str) -> None:
        """A request waits for `model`, which has no replica published (the router's
        `Activator`)."""
        self._waiting[model] = self._clock()
        for hear in self._on_activate:
            hear(model)
        self.wake()

    def listen_activations(self, hear: Callable[[str], None]) -> None:
        """Adds who hears of each request that starts waiting for a model here (the
        store's demand rows, so the leader hears of a follower's wait at once)."""
        self._on_activate.append(hear)

    def watch_requests(self, asked: Mapping[str, float], clock: Callable[[], float]) -> None:
        """The router's record of when each model was last asked for, in `clock`'s time
        (the flow control's `last_asked`): read on each pass, written by the request
        path with no more than a dict store."""
        self._asked = asked
        self._asked_clock = clock

    def watch_load(self, load: Callable[[str], tuple[float | None, int, bool]]) -> None:
        """The router's reading of a model's load (`FlowControl.load`): its saturation
        level over the replicas routed to, how many, and whether its objective is
        breached. Read once a pass for load scaling."""
        self._load = load

    def step_scaling(self) -> None:
        """One step of load scaling for every placeable model (`scale_step`), on the
        leader only: a follower's state is dropped, so a new leader starts from what
        runs."""
        if self._load is None or not self.leading or self.config.scale.up_at <= 0:
            self._scale.clear()
            self._scale_why.clear()
            return
        now = self._clock()
        demand = self.demand()
        views = self.book.views()
        for model in self._catalog.models():
            if not placeable(model):
                continue
            plain = replace(demand.get(model.name, ModelDemand()), load_target=None, load_why="")
            want = desired(model, plain, now, self.config.tz)
            level, ready, breached = self._load(model.name)
            starting = sum(1 for r in views if r.model == model.name and r.phase in ("pending", "starting"))
            step = scale_step(
                self._scale.get(model.name),
                LoadReading(level, ready, starting, breached),
                floor=want.floor,
                ceiling=want.ceiling,
                now=now,
                policy=self.config.scale,
            )
            if step is None:
                self._scale.pop(model.name, None)
                self._scale_why.pop(model.name, None)
                continue
            if step.changed:
                log.info("control plane: %s: %s", model.name, step.why)
            self._scale[model.name] = step.state
            self._scale_why[model.name] = step.why

    def now(self) -> float:
        """This plane's clock (UNIX seconds), on which every time it reports is given."""
        return self._clock()

    def asked_here(self) -> dict[str, Asked]:
        """What this server's router saw of each model, on this plane's clock: when it was
        last asked for, and since when a request has waited for it (only while one
        waits). The store's demand rows are made of it."""
        now = self._clock()
        offset = now - self._asked_clock()
        return {
            model: Asked(self._asked_at(model, offset), self._waiting_since(model, now))
            for model in set(self._waiting) | set(self._asked)
        }

    def hear_others(self, reports: Sequence[ServerDemand], silent_after: timedelta) -> None:
        """The other servers' reports, on this plane's clock (the leader reads them from
        the store each interval): planned with from now on, each until its server has
        been silent for `silent_after`. A request newly waiting elsewhere runs a pass
        at once."""
        waited = {r.model for r in self._others if r.asked.waiting_since is not None}
        self._others = tuple(reports)
        self._others_silent_after = silent_after.total_seconds()
        if any(r.asked.waiting_since is not None and r.model not in waited for r in self._others):
            self.wake()

    def demand(self) -> dict[str, ModelDemand]:
        """What the plan works with: this server's router's demand, the replicas this
        plane adopted (each given a whole idle period), and every other server's
        (`hear_others`)."""
        now = self._clock()
        offset = now - self._asked_clock()
        own: dict[str, ModelDemand] = {}
        for model in set(self._waiting) | set(self._asked) | set(self._adopted_at):
            asked_at = self._waiting.get(model)  # an ask even once its replica is published
            since = self._waiting_since(model, now)
            times = [t for t in (self._asked_at(model, offset), asked_at, self._adopted_at.get(model)) if t]
            own[model] = ModelDemand(waiting=since is not None, last_request_at=max(times) if times else None)
        merged = merge_demand(
            own,
            self._others,
            now=now,
            silent_after=self._others_silent_after,
            wait_limit=self.config.activation_wait.total_seconds(),
        )
        for model, state in self._scale.items():
            merged[model] = replace(
                merged.get(model, ModelDemand()), load_target=state.target, load_why=self._scale_why[model]
            )
        return merged

    def _waiting_since(self, model: str, now: float) -> float | None:
        """When the request waiting here for `model` began; None when none waits: no
        request asked, its replica is published, or it gave up (activation_wait),
        in which case it is forgotten."""
        since = self._waiting.get(model)
        if since is None:
            return None
        if now - since >= self.config.activation_wait.total_seconds():
            del self._waiting[model]
            return None
        return None if self.publisher.registry.for_model(model) else since

    def _asked_at(self, model: str, offset: float) -> float | None:
        at = self._asked.get(model)
        return None if at is None else at + offset

    def api_key(self, replica_id: str) -> str:
        return engine_key(self._secret, replica_id)

    # --- what the admin API reads ---------------------------------------------------

    @property
    def catalog(self) -> Catalog:
        return self._catalog

    def replace_catalog(self, catalog: Catalog) -> None:
        """A runtime catalog change: the next pass (now) acts on it."""
        self._catalog = catalog
        self.wake()

    @property
    def quotas(self) -> Quotas:
        """The owners' GPU quotas planned with (none unless the server's store sets some)."""
        return self._quotas

    def set_quotas(self, quotas: Quotas) -> None:
        """Quotas read anew from the store: the next pass (now) plans with them, so a
        raised quota places what waited for it at once."""
        self._quotas = quotas
        self.wake()

    def owners(self) -> set[str]:
        """The scopes the catalog's models count against (the quotas' tree is read for
        these)."""
        return {m.owner for m in self._catalog.models() if m.owner}

    def nodes(self) -> list[NodeView]:
        """Every node, with the end of the certificate it last showed."""
        shown = self.hub.certificates
        return [
            replace(view, cert_not_after=shown[view.id][1]) if view.id in shown else view
            for view in self.registry.views()
        ]

    def replicas(self) -> list[ReplicaView]:
        return self.book.views()

    def explain(self, model: str) -> list[str]:
        now = self._clock()
        lines = planning.explain(
            self._catalog,
            self.registry.views(),
            self.book.views(),
            self.demand(),
            now,
            tz=self.config.tz,
            model=model,
            facility=self.config.facility,
            owner_quotas=self._quotas.limits,
            owner_parents=self._quotas.parents,
        )
        found = self._catalog.resolve(model)
        if found is not None and self.reconciler.backoff.holds(found.name, now):
            failures = self.reconciler.backoff.failures.get(found.name, 0)
            left = self.reconciler.backoff.until[found.name] - now
            lines.append(f"{failures} failure(s) in a row: not started again for {left:.0f}s (backoff)")
        if not self.is_leader():
            lines.append("this server does not hold the leader lease: another one places replicas")
        elif not self.settled():
            lines.append(
                "this control plane just started or became the leader: agents are given"
                " unreachable_after to reconnect first"
            )
        return lines

    # --- what the agents say (AgentEvents) ------------------------------------------

    def registered(self, message: Register) -> None:
        node_id = message.node_id
        self.registry.registered(node_id, message.inventory)
        listed: set[str] = set()
        for state in message.replicas:
            listed.add(state.replica_id)
            self._reported(node_id, state, listed_in_full=True)
        # What this plane ordered there and the agent does not list: its order was lost
        # with the old connection (send it again now) or the agent forgot it (failed).
        for record in self.book.missing(node_id, listed, resend_after_s=0.0):
            part = record.part_on(node_id)
            if part is not None:
                part.start_sent_at = None
        log.info(
            "node %s registered: %d replica(s) running, %d core(s), %d GPU(s)",
            node_id,
            len(message.replicas),
            message.inventory.cpu_cores,
            len(message.inventory.gpus),
        )
        self.wake()

    def heartbeat(self, node_id: str, message: Heartbeat) -> None:
        self.registry.heard(node_id, message.inventory)
        listed = {state.replica_id for state in message.replicas}
        for state in message.replicas:
            self._reported(node_id, state, listed_in_full=True)
        resend = self.book.missing(node_id, listed, resend_after_s=self.reconciler.rules.resend_after_s)
        for record in resend:
            part = record.part_on(node_id)
            if part is not None:
                part.start_sent_at = None
        if resend:
            self.wake()

    def replica_state(self, node_id: str, message: ReplicaState) -> None:
        self.registry.heard(node_id)
        self._reported(node_id, message, listed_in_full=False)

    def fetch_progress(self, node_id: str, message: FetchProgress) -> None:
        self.registry.heard(node_id)
        record = self.book.get(message.replica_id)
        if record is not None:
            total = f" of {message.total_bytes}" if message.total_bytes is not None else ""
            record.detail = f"fetching {message.file}: {message.done_bytes}{total} bytes"

    def refused(self, node_id: str, message: Error) -> None:
        if message.code == STALE_TERM:
            # The agent obeys a later leader: this plane is deposed and will find out at
            # its next renewal; its order changed nothing, so nothing is marked failed.
            log.warning("node %s refused an order from an old term: %s", node_id, message.message)
            self.wake()
            return
        record = self.book.get(message.replica_id) if message.replica_id else None
        if record is None:
            return
        part = record.part_on(node_id)
        if part is not None:
            failed = ReplicaState(
                replica_id=record.id,
                model=record.model,
                profile=record.profile,
                state=ReplicaStatus.FAILED,
                detail=message.message,
            )
            self._reported(node_id, failed, listed_in_full=False)

    def disconnected(self, node_id: str) -> None:
        self.registry.disconnected(node_id)
        log.warning("node %s disconnected; its replicas stay routed until it is lost", node_id)

    def _reported(self, node_id: str, state: ReplicaState, *, listed_in_full: bool) -> None:
        known = self.book.get(state.replica_id) is not None
        if not known and state.state.ended and not listed_in_full:
            # The answer to acknowledging an end (or to stopping what a node did not
            # know): nothing left to track. Adopting it would be acknowledged again,
            # and answered again, for ever.
            return
        change = self.book.reported(node_id, state)
        if change is None:
            return
        if change.adopted:
            self._adopted(node_id, change)
        self._changed(change)

    def _adopted(self, node_id: str, change: Change) -> None:
        record = self.book.get(change.replica_id)
        node = self.registry.get(node_id)
        if record is None or node is None:
            return
        model = self._catalog.resolve(record.model)
        profile = model.profile_by_name(record.profile) if model is not None else None
        others = [
            p.assignment
            for other in self.book.on_node(node_id)
            if other.id != record.id
            for p in other.parts
            if p.assignment.node_id == node_id
        ]
        record.parts[0].assignment = adopted_assignment(node_id, node.inventory, profile, others)
        # An adopted on-demand replica gets a whole idle period from now: this plane
        # has not seen its requests, which is not the same as there having been none.
        self._adopted_at[record.model] = self._clock()
        # It ran before this plane did: older than any replica this plane ordered, so
        # where the two together exceed the ceiling (an agent that reconnected after the
        # plane had already placed), the surplus stopped, newest first, is the copy this
        # plane started and not the one that was serving.
        record.since = min(record.since, self._led_since or self._started_at or record.since)
        log.info("replica %s of %s adopted on %s (%s)", record.id, record.model, node_id, record.phase)

    def _changed(self, change: Change) -> None:
        if change.after == "ready":
            record = self.book.get(change.replica_id)
            if record is not None:
                self.reconciler.backoff.succeeded(record.model)
            # Published at once: a request may be waiting for exactly this replica.
            self.reconciler.publish()
        elif change.before == "ready":
            self.reconciler.publish()
        if change.after in ("failed", "stopped"):
            self.wake()
