"""The agent's work on its node: carrying out the control plane's orders (weights,
ports, cores, the engine's command line, the process), and composing what it reports
(registration, heartbeats, replica states, download progress).

The connection itself is `client.AgentLink`'s; this object does not know whether one is
open. What it has to say goes into `outbox`, which the link empties while connected;
a reconnecting link starts by registering, which carries every replica's state anew,
so nothing queued while disconnected needs keeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import aiohttp

from llmgw.agent.node_firewall import NodeFirewall
from llmgw.agent.state import StateDir, TermFence
from llmgw.agent.supervisor import Replica, Supervisor
from llmgw.agent.weights import Fetcher, plan_weights
from llmgw.engines.launch import LaunchContext, ports_needed
from llmgw.engines.launchers import launch_for
from llmgw.engines.profile import EngineProfile
from llmgw.errors import FirewallError, LlmgwError, ReplicaError
from llmgw.protocol.inventory import Inventory
from llmgw.protocol.messages import (
    STALE_TERM,
    AgentMessage,
    ControlMessage,
    Error,
    FetchProgress,
    Firewall,
    Heartbeat,
    NodeSettings,
    Register,
    Registered,
    ReplicaState,
    ReplicaStatus,
    Settings,
    StartReplica,
    StopReplica,
)

log = logging.getLogger(__name__)

OUTBOX_SIZE = 10_000
"""Messages waiting for the connection. Past it the newest are dropped, and counted:
the next heartbeat repeats every replica's state anyway."""
ENGINES_WITHOUT_WEIGHTS = ("sim",)


@dataclass(frozen=True)
class NodeConfig:
    """What the agent was started with."""

    node_id: str
    state_dir: Path
    weights_dir: Path
    engine_host: str = "127.0.0.1"
    """The address engines bind."""
    advertise_host: str = ""
    """The address put in replicas' URLs, which the gateway dials; empty: engine_host,
    or this machine's name when engines bind every address."""
    binaries: Mapping[str, str] = field(default_factory=dict)
    """Engine to the program that runs it, where not the launch module's default."""
    mirror_url: str = ""
    """Overrides the mirror the control plane names in its settings."""
    inventory_interval: timedelta = timedelta(seconds=60)

    @property
    def url_host(self) -> str:
        if self.advertise_host:
            return self.advertise_host
        if self.engine_host in ("0.0.0.0", "::", ""):
            return socket.getfqdn()
        return self.engine_host


class Node:
    """One agent's replicas and reports."""

    def __init__(
        self,
        config: NodeConfig,
        session: aiohttp.ClientSession,
        *,
        discover: Callable[[], Inventory],
        supervisor: Supervisor | None = None,
        fetcher: Fetcher | None = None,
        firewall: NodeFirewall | None = None,
    ) -> None:
        self.config = config
        self.discover = discover
        self.outbox: asyncio.Queue[AgentMessage] = asyncio.Queue(OUTBOX_SIZE)
        self.dropped = 0
        self.supervisor = supervisor or Supervisor(
            StateDir(config.state_dir), session, port_range=NodeSettings().port_range, on_change=self.emit
        )
        self.fetcher = fetcher or Fetcher(session)
        self.firewall = firewall
        """None: this agent leaves the machine's firewall alone."""
        self._firewall_lock = asyncio.Lock()
        self.fence = TermFence(StateDir(config.state_dir).term_path)
        self.settings = NodeSettings()
        self.inventory: Inventory | None = None
        self._inventory_sent: Inventory | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._bringing_up: dict[str, asyncio.Task[None]] = {}

    # --- life cycle -----------------------------------------------------------------

    async def start(self) -> None:
        """Takes inventory and adopts the replicas the state directory records."""
        self.inventory = await asyncio.to_thread(self.discover)
        await self.supervisor.start()
        self._spawn(self._refresh_inventory(), "inventory")

    async def close(self) -> None:
        """Stops every task of the agent; the engines go on running."""
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.supervisor.close()

    def _spawn(self, work: object, name: str) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.create_task(work, name=f"llmgw-agent-{name}")  # type: ignore[arg-type]
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("agent task %s failed", task.get_name(), exc_info=task.exception())

    async def _refresh_inventory(self) -> None:
        while True:
            await asyncio.sleep(self.config.inventory_interval / timedelta(seconds=1))
            try:
                self.inventory = await asyncio.to_thread(self.discover)
            except LlmgwError as exc:  # labels are checked at start; this is a machine hiccup
                log.warning("inventory refresh failed: %s", exc)

    # --- what the agent says --------------------------------------------------------

    def emit(self, message: AgentMessage) -> None:
        """Queues a message for the control plane."""
        try:
            self.outbox.put_nowait(message)
        except asyncio.QueueFull:
            self.dropped += 1

    def reset_outbox(self) -> None:
        """Empties the queue before registering: registration says it all afresh."""
        while not self.outbox.empty():
            self.outbox.get_nowait()

    def register_message(self) -> Register:
        assert self.inventory is not None, "start() takes inventory first"
        self._inventory_sent = self.inventory
        return Register(
            node_id=self.config.node_id, inventory=self.inventory, replicas=self.supervisor.reports()
        )

    def heartbeat_message(self, seq: int) -> Heartbeat:
        changed = self.inventory if self.inventory != self._inventory_sent else None
        self._inventory_sent = self.inventory
        return Heartbeat(seq=seq, inventory=changed, replicas=self.supervisor.reports())

    # --- what the control plane says ------------------------------------------------

    def handle(self, message: ControlMessage) -> None:
        """Acts on one message; anything slow happens in a task of its own, so orders
        for different replicas do not wait on each other."""
        if isinstance(message, StartReplica | StopReplica) and not self.fence.admit(message.term):
            log.warning(
                "order %s for replica %s refused: term %d, and this node obeys term %d",
                message.type,
                message.replica_id,
                message.term,
                self.fence.highest,
            )
            self.emit(
                Error(
                    code=STALE_TERM,
                    message=(
                        f"{message.type} carries leader term {message.term}, and this node has obeyed"
                        f" term {self.fence.highest}: its sender is no longer the leader"
                    ),
                    replica_id=message.replica_id,
                )
            )
            return
        if isinstance(message, Registered | Settings):
            self.apply_settings(message.settings)
            if isinstance(message, Registered) and self.firewall is not None:
                # Each registration's firewall message is applied even when unchanged, so
                # a table deleted by hand meanwhile comes back.
                self.firewall.applied = None
        elif isinstance(message, Firewall):
            self._spawn(self.apply_firewall(message), "firewall")
        elif isinstance(message, StartReplica):
            self.start_replica(message)
        elif isinstance(message, StopReplica):
            self._spawn(self.stop_replica(message), f"stop-{message.replica_id}")
        elif isinstance(message, Error):
            log.warning("control plane: %s: %s", message.code, message.message)

    def apply_settings(self, settings: NodeSettings) -> None:
        self.settings = settings
        self.supervisor.port_range = settings.port_range

    async def apply_firewall(self, message: Firewall) -> None:
        """Installs or removes llmgw's nft table as `message` says; a failure is logged
        and told to the control plane (`error`, code `refused`), the engines unaffected."""
        if self.firewall is None:
            return
        firewall = self.firewall
        # One at a time and in order: two messages in quick succession end as the second.
        async with self._firewall_lock:
            try:
                await asyncio.to_thread(firewall.apply, message)
            except (FirewallError, ValueError) as exc:
                log.warning("firewall: not applied: %s", exc)
                self.emit(Error(code="refused", message=f"firewall: {exc}"))

    def start_replica(self, order: StartReplica) -> None:
        existing = self.supervisor.get(order.replica_id)
        if existing is not None and not existing.status.ended:
            self.emit(existing.report())  # the order was repeated: say how it is going
            return
        if existing is not None:
            self.supervisor.replicas.pop(order.replica_id, None)
        try:
            replica = self.supervisor.begin(
                order.replica_id, order.model, order.profile.name, order.profile.engine, "preparing"
            )
        except ReplicaError as exc:
            self.emit(Error(code="refused", message=str(exc), replica_id=order.replica_id))
            return
        task = self._spawn(self._bring_up(replica, order), f"start-{order.replica_id}")
        self._bringing_up[order.replica_id] = task
        task.add_done_callback(lambda _: self._bringing_up.pop(order.replica_id, None))

    async def stop_replica(self, order: StopReplica) -> None:
        starting = self._bringing_up.get(order.replica_id)
        if starting is not None:
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await starting
        if self.supervisor.get(order.replica_id) is None:
            self.emit(
                ReplicaState(
                    replica_id=order.replica_id, state=ReplicaStatus.STOPPED, detail="not on this node"
                )
            )
            return
        await self.supervisor.stop(order.replica_id, order.drain)

    async def _bring_up(self, replica: Replica, order: StartReplica) -> None:
        try:
            profile = order.profile.profile()
            model_path, adapters = await self._weights(replica, order, profile)
            ctx = self._context(order, profile, model_path, adapters)
            launch = launch_for(profile, ctx, self.config.binaries.get(profile.engine))
            url = f"http://{self.config.url_host}:{ctx.port}"
            ports = tuple(p for p in (ctx.port, ctx.dist_port, ctx.kv_events_port) if p)
            self.supervisor.launch(replica, launch, ports=ports, url=url)
        except LlmgwError as exc:
            log.warning("replica %s: not started: %s", order.replica_id, exc)
            self.supervisor.fail(replica, str(exc))

    async def _weights(
        self, replica: Replica, order: StartReplica, profile: EngineProfile
    ) -> tuple[str, dict[str, str]]:
        if profile.engine in ENGINES_WITHOUT_WEIGHTS:
            return "", {}
        mirror = self.config.mirror_url or self.settings.mirror_url

        def progress(source: str) -> Callable[[str, int, int | None], None]:
            def tell(name: str, done: int, total: int | None) -> None:
                replica.detail = f"fetching {name}"
                self.emit(
                    FetchProgress(
                        replica_id=replica.replica_id,
                        source=source,
                        file=name,
                        done_bytes=done,
                        total_bytes=total,
                    )
                )

            return tell

        weights_dir = self.config.weights_dir
        plan = plan_weights(
            profile.model_path, weights_dir=weights_dir, mirror_url=mirror, origin=order.origin
        )
        model_path = await self.fetcher.resolve(plan, profile.engine, progress(profile.model_path))
        adapters: dict[str, str] = {}
        for adapter in profile.adapters:
            adapter_plan = plan_weights(adapter.path, weights_dir=weights_dir, mirror_url=mirror)
            adapters[adapter.name] = str(
                await self.fetcher.resolve(adapter_plan, profile.engine, progress(adapter.path))
            )
        return str(model_path), adapters

    def _context(
        self, order: StartReplica, profile: EngineProfile, model_path: str, adapters: dict[str, str]
    ) -> LaunchContext:
        needs = ports_needed(profile, order.node_rank)
        wants_dist = needs.dist and not order.dist_port
        count = int(needs.http) + int(wants_dist) + int(needs.kv_events)
        if order.ports and len(order.ports) != count:
            raise ReplicaError(
                f"replica {order.replica_id}: the order gives {len(order.ports)} ports and this profile"
                f" takes {count} on node rank {order.node_rank}"
            )
        ports = list(order.ports or self.supervisor.choose_ports(count))
        http = ports.pop(0) if needs.http else 0
        dist = ports.pop(0) if wants_dist else order.dist_port
        kv_events = ports.pop(0) if needs.kv_events else 0
        cores = order.cpu_cores or self.supervisor.choose_cores(profile.cpu_cores)
        return LaunchContext(
            port=http,
            host=self.config.engine_host,
            dist_port=dist,
            kv_events_port=kv_events,
            gpus=order.gpus,
            cpu_cores=cores,
            node_rank=order.node_rank,
            master_address=order.master_address,
            mgmt_interface=self.settings.mgmt_interface,
            model_path=model_path,
            adapter_paths=adapters,
            state_dir=str(self.supervisor.state.replica_dir(order.replica_id)),
            api_key=order.api_key,
            context_length=order.context_length,
            embeddings=order.embeddings,
        )
