"""A minimal control-plane side of the agent protocol, for tests: it accepts agents on
loopback, answers `register`, records every message, keeps each replica's latest
state, and sends whatever orders a test gives it.

It runs its own event loop in a thread, so plain synchronous tests drive it:
`wait_for` blocks on a condition that every received message notifies (it never
sleeps a fixed time), and `send` hands an order to the agent's socket from the test's
thread. The control plane proper (reconciler, placement) replaces it; the wire it
speaks is `llmgw.protocol.messages`, the same for both.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from types import TracebackType
from typing import TypeVar

import aiohttp
from aiohttp import web

from llmgw.errors import AgentProtocolError
from llmgw.protocol.messages import (
    AGENT_PATH,
    PROTOCOL_VERSION,
    AgentMessage,
    ControlMessage,
    Error,
    Heartbeat,
    NodeSettings,
    Register,
    Registered,
    ReplicaState,
    ReplicaStatus,
    decode_from_agent,
    encode,
)
from llmgw.protocol.tls import peer_names

log = logging.getLogger(__name__)

T = TypeVar("T")
START_TIMEOUT_S = 10.0


class WaitTimeout(AssertionError):
    """What a test waited for did not happen in time."""


@dataclass
class AgentSeen:
    """Everything the fake knows of one agent (by node id)."""

    node_id: str
    registrations: list[Register] = field(default_factory=list)
    messages: list[AgentMessage] = field(default_factory=list)
    replicas: dict[str, ReplicaState] = field(default_factory=dict)
    """Each replica's latest state, from whichever message said it last."""
    history: list[ReplicaState] = field(default_factory=list)
    """Every replica_state message, in order: each state a replica went through."""
    connected: bool = False
    cert_names: set[str] = field(default_factory=set)
    ws: web.WebSocketResponse | None = None

    @property
    def heartbeats(self) -> list[Heartbeat]:
        return [m for m in self.messages if isinstance(m, Heartbeat)]


class FakeControlPlane:
    """A control plane that only listens to agents and passes on a test's orders."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        ssl_context: ssl.SSLContext | None = None,
        settings: NodeSettings | None = None,
        heartbeat_interval: timedelta = timedelta(seconds=1),
        require_cert_name: bool = False,
    ) -> None:
        self.host = host
        self.port = port
        self.ssl_context = ssl_context
        self.settings = settings or NodeSettings()
        self.heartbeat_interval = heartbeat_interval
        self.require_cert_name = require_cert_name
        self.agents: dict[str, AgentSeen] = {}
        self.refused: list[str] = []
        self._changed = threading.Condition()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopping: asyncio.Event | None = None

    # --- running ----------------------------------------------------------------------

    @property
    def address(self) -> str:
        """host:port, as `llmgw agent --server` takes it."""
        return f"{self.host}:{self.port}"

    def start(self) -> FakeControlPlane:
        ready = threading.Event()
        failure: list[BaseException] = []
        self._thread = threading.Thread(
            target=self._run, args=(ready, failure), daemon=True, name="fake-control"
        )
        self._thread.start()
        if not ready.wait(START_TIMEOUT_S):
            raise RuntimeError("the fake control plane did not start listening")
        if failure:
            raise failure[0]
        return self

    def stop(self) -> None:
        loop, stopping = self._loop, self._stopping
        if loop is not None and stopping is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stopping.set)
        if self._thread is not None:
            self._thread.join(START_TIMEOUT_S)
        with self._changed:
            for agent in self.agents.values():
                agent.connected = False
                agent.ws = None
            self._changed.notify_all()

    def __enter__(self) -> FakeControlPlane:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _run(self, ready: threading.Event, failure: list[BaseException]) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve(ready))
        except BaseException as exc:
            failure.append(exc)
            ready.set()
        finally:
            loop.close()

    async def _serve(self, ready: threading.Event) -> None:
        self._stopping = asyncio.Event()
        app = web.Application()
        app.router.add_get(AGENT_PATH, self._agent)
        runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port, ssl_context=self.ssl_context)
        await site.start()
        self.port = int(runner.addresses[0][1])
        ready.set()
        try:
            await self._stopping.wait()
        finally:
            for agent in list(self.agents.values()):
                if agent.ws is not None:
                    with contextlib.suppress(Exception):
                        await agent.ws.close()
            await runner.cleanup()

    # --- the agent's socket ------------------------------------------------------------

    async def _agent(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(heartbeat=20.0)
        await ws.prepare(request)
        names = peer_names(request.transport.get_extra_info("peercert") if request.transport else None)
        try:
            first = await ws.receive(timeout=30.0)
            message = decode_from_agent(first.data) if first.type == aiohttp.WSMsgType.TEXT else None
        except (AgentProtocolError, TimeoutError) as exc:
            message = None
            log.warning("fake control plane: first frame unreadable: %s", exc)
        refusal = self._refusal(message, names)
        if refusal is not None or not isinstance(message, Register):
            await ws.send_str(encode(refusal or Error(code="unexpected", message="register first")))
            await ws.close()
            return ws
        agent = self._registered(message, ws, names)
        await ws.send_str(
            encode(
                Registered(
                    node_id=message.node_id,
                    heartbeat_interval=self.heartbeat_interval,
                    settings=self.settings,
                )
            )
        )
        try:
            async for frame in ws:
                if frame.type == aiohttp.WSMsgType.TEXT:
                    self._received(agent, frame.data)
        finally:
            with self._changed:
                if agent.ws is ws:
                    agent.connected = False
                    agent.ws = None
                self._changed.notify_all()
        return ws

    def _refusal(self, message: AgentMessage | None, names: set[str]) -> Error | None:
        if not isinstance(message, Register):
            return None
        reason: Error | None = None
        if message.version != PROTOCOL_VERSION:
            reason = Error(code="version", message=f"this control plane speaks version {PROTOCOL_VERSION}")
        elif self.require_cert_name and message.node_id not in names:
            reason = Error(
                code="refused", message=f"node {message.node_id!r} is not named by its certificate"
            )
        if reason is not None:
            with self._changed:
                self.refused.append(f"{message.node_id}: {reason.message}")
                self._changed.notify_all()
        return reason

    def _registered(self, message: Register, ws: web.WebSocketResponse, names: set[str]) -> AgentSeen:
        with self._changed:
            agent = self.agents.setdefault(message.node_id, AgentSeen(message.node_id))
            agent.registrations.append(message)
            agent.messages.append(message)
            agent.connected = True
            agent.ws = ws
            agent.cert_names = names
            for state in message.replicas:
                agent.replicas[state.replica_id] = state
            self._changed.notify_all()
        return agent

    def _received(self, agent: AgentSeen, data: str) -> None:
        try:
            message = decode_from_agent(data)
        except AgentProtocolError as exc:
            log.warning("fake control plane: %s", exc)
            return
        with self._changed:
            agent.messages.append(message)
            if isinstance(message, ReplicaState):
                agent.replicas[message.replica_id] = message
                agent.history.append(message)
            elif isinstance(message, Heartbeat):
                for state in message.replicas:
                    agent.replicas[state.replica_id] = state
            self._changed.notify_all()

    # --- what tests call ---------------------------------------------------------------

    def wait_for(self, what: Callable[[FakeControlPlane], T | None], timeout: float, explain: str = "") -> T:
        """Blocks until `what(self)` returns something true, and returns it; WaitTimeout
        after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                result = what(self)
                if result:
                    return result
                left = deadline - time.monotonic()
                if left <= 0:
                    raise WaitTimeout(
                        f"{explain or 'condition'} not met within {timeout}s; agents: {self.summary()}"
                    )
                self._changed.wait(left)

    def wait_registered(self, node_id: str, count: int = 1, timeout: float = 60.0) -> Register:
        """The agent's `count`-th registration."""

        def seen(cp: FakeControlPlane) -> Register | None:
            agent = cp.agents.get(node_id)
            if agent is None or len(agent.registrations) < count or not agent.connected:
                return None
            return agent.registrations[count - 1]

        return self.wait_for(seen, timeout, f"registration {count} of {node_id}")

    def wait_replica(
        self, node_id: str, replica_id: str, states: set[ReplicaStatus], timeout: float = 60.0
    ) -> ReplicaState:
        """The replica's state once it is one of `states`."""

        def seen(cp: FakeControlPlane) -> ReplicaState | None:
            agent = cp.agents.get(node_id)
            state = agent.replicas.get(replica_id) if agent else None
            return state if state is not None and state.state in states else None

        wanted = "/".join(sorted(states))
        return self.wait_for(seen, timeout, f"replica {replica_id} on {node_id} {wanted}")

    def agent(self, node_id: str) -> AgentSeen:
        with self._changed:
            return self.agents[node_id]

    def send(self, node_id: str, message: ControlMessage, timeout: float = 5.0) -> None:
        """Sends an order to a connected agent."""
        loop = self._loop
        with self._changed:
            agent = self.agents.get(node_id)
            ws = agent.ws if agent else None
        if loop is None or ws is None:
            raise RuntimeError(f"agent {node_id} is not connected")
        asyncio.run_coroutine_threadsafe(ws.send_str(encode(message)), loop).result(timeout)

    def drop(self, node_id: str, timeout: float = 5.0) -> None:
        """Closes the agent's socket from this side, as a network blip would."""
        loop = self._loop
        with self._changed:
            agent = self.agents.get(node_id)
            ws = agent.ws if agent else None
        if loop is not None and ws is not None:
            asyncio.run_coroutine_threadsafe(ws.close(), loop).result(timeout)

    def summary(self) -> str:
        parts = []
        for agent in self.agents.values():
            states = ", ".join(f"{r.replica_id}={r.state}" for r in agent.replicas.values())
            parts.append(f"{agent.node_id}({'up' if agent.connected else 'down'}; {states or 'no replicas'})")
        return "; ".join(parts) or "none"
