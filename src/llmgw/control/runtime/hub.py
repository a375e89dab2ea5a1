"""The control plane's end of the agent protocol: the WebSocket every agent keeps open
on `agent_listen`, registration, and the orders sent back down it.

The hub only speaks the protocol (`llmgw.protocol.messages`, docs/agent-protocol.md); what
an agent's messages mean for nodes and replicas is the `AgentEvents` it is given. One
connection per node: a node that connects again (after a blip its old socket has not
noticed yet) replaces its old connection, which is closed.

With TLS, the node must be named by its certificate (`llmgw.protocol.tls.peer_names`), so
one machine's certificate cannot register as another machine; and a certificate whose
serial was revoked (`llmgw node remove`, read from the store into `revoked`) is refused
at registration, and a node connected with one is sent away (`refuse_revoked`) with the
error code `revoked`. The end of each node's certificate is kept for `llmgw ctl nodes`
and the expiry warnings (`certificates`).

Only a control plane that leads takes agents (`accepting`): a standby answers `register`
with `error` code `not_leader` and closes, and a leader that loses the lease dismisses
every agent the same way (`dismiss_all`), so agents given several servers move on to
the one that leads.

Every agent is told what llmgw's nftables table on its machine should be (`firewall`)
right after `registered`, and again whenever `firewall.enabled` or `firewall_networks`
changes: the engines' port range, open to this control plane's address as that agent
reached it and to `firewall_networks`.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import ssl
from collections.abc import Callable
from datetime import timedelta
from typing import Protocol

import aiohttp
from aiohttp import web

from llmgw.errors import AgentProtocolError
from llmgw.pki.expiry import peer_not_after
from llmgw.protocol.messages import (
    AGENT_PATH,
    NOT_LEADER,
    PROTOCOL_VERSION,
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
    Settings,
    decode_from_agent,
    encode,
)
from llmgw.protocol.tls import peer_names

log = logging.getLogger(__name__)

REGISTER_WAIT_S = 30.0
"""How long a new connection may take to send `register`."""
PING_INTERVAL_S = 20.0
"""WebSocket pings find a dead peer behind a silent network (the protocol's 20 s)."""
REVOKED = "revoked"
"""The error code a node with a revoked certificate is refused with."""


def _revoked(node_id: str, serial: str) -> Error:
    return Error(
        code=REVOKED,
        message=f"node {node_id!r}: its certificate (serial {serial}) was revoked by llmgw node remove;"
        " issue a new one with llmgw node add",
    )


class AgentEvents(Protocol):
    """What the hub tells the rest of the control plane."""

    def registered(self, message: Register) -> None: ...

    def heartbeat(self, node_id: str, message: Heartbeat) -> None: ...

    def replica_state(self, node_id: str, message: ReplicaState) -> None: ...

    def fetch_progress(self, node_id: str, message: FetchProgress) -> None: ...

    def refused(self, node_id: str, message: Error) -> None:
        """The agent could not carry out an order (`error`, code `refused`)."""

    def disconnected(self, node_id: str) -> None: ...


class AgentHub:
    """Accepts agents and carries orders to them."""

    def __init__(
        self,
        events: AgentEvents,
        *,
        settings: NodeSettings,
        heartbeat_interval: timedelta,
        require_cert_name: bool = False,
        accepting: Callable[[], bool] = lambda: True,
    ) -> None:
        self._events = events
        self.accepting = accepting
        self.settings = settings
        self.heartbeat_interval = heartbeat_interval
        self.require_cert_name = require_cert_name
        self._sockets: dict[str, web.WebSocketResponse] = {}
        self.revoked: frozenset[str] = frozenset()
        """Serials of revoked node certificates (upper-case hex, `llmgw.pki.serial_text`)."""
        self.certificates: dict[str, tuple[str, float]] = {}
        """Each node's certificate as last shown: (serial, not-after in UNIX seconds); kept
        after it disconnects, so a lost node's certificate is still listed."""
        self._local: dict[str, str] = {}
        """Node id to this control plane's address on that node's connection."""
        self._runner: web.AppRunner | None = None
        self.port = 0

    # --- listening ------------------------------------------------------------------

    def application(self) -> web.Application:
        app = web.Application()
        app.router.add_get(AGENT_PATH, self._agent)
        return app

    async def start(self, host: str, port: int, ssl_context: ssl.SSLContext | None) -> None:
        """Listens on host:port (0: any free port, then in `self.port`)."""
        runner = web.AppRunner(self.application(), handle_signals=False, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, host, port, ssl_context=ssl_context)
        await site.start()
        self._runner = runner
        self.port = int(runner.addresses[0][1])

    async def close(self) -> None:
        """Closes every agent's socket (they reconnect to the next control plane) and stops
        listening."""
        for ws in list(self._sockets.values()):
            with contextlib.suppress(Exception):
                await ws.close()
        self._sockets.clear()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def dismiss_all(self) -> None:
        """Tells every agent this control plane no longer leads (`error`, code
        `not_leader`) and closes its socket, so it dials the server that leads now."""
        sockets = list(self._sockets.values())
        for ws in sockets:
            with contextlib.suppress(Exception):
                await ws.send_str(encode(_not_leader()))
                await ws.close()

    # --- talking --------------------------------------------------------------------

    def connected(self, node_id: str) -> bool:
        return node_id in self._sockets

    @property
    def connections(self) -> int:
        """Agents connected now."""
        return len(self._sockets)

    async def send(self, node_id: str, message: ControlMessage) -> bool:
        """Sends one message; False when the node is not connected or the socket broke
        (the next registration resends what matters)."""
        ws = self._sockets.get(node_id)
        if ws is None or ws.closed:
            return False
        try:
            await ws.send_str(encode(message))
        except (ConnectionError, RuntimeError) as exc:
            log.info("agent %s: an order was not delivered: %s", node_id, exc)
            return False
        return True

    async def refuse_revoked(self, revoked: frozenset[str]) -> list[str]:
        """Takes a new set of revoked serials and sends away every connected node showing
        one; the nodes sent away."""
        self.revoked = revoked
        gone: list[str] = []
        for node_id, ws in list(self._sockets.items()):
            shown = self.certificates.get(node_id)
            if shown is None or shown[0] not in revoked:
                continue
            log.warning("agent %s sent away: its certificate (serial %s) was revoked", node_id, shown[0])
            with contextlib.suppress(ConnectionError, RuntimeError):
                await ws.send_str(encode(_revoked(node_id, shown[0])))
                await ws.close()
            gone.append(node_id)
        return gone

    async def broadcast_settings(self, settings: NodeSettings) -> None:
        """Sends new cluster settings to every agent, and each its firewall where
        `firewall` or `firewall_networks` changed."""
        firewall_changed = _firewall_fields(settings) != _firewall_fields(self.settings)
        self.settings = settings
        for node_id in list(self._sockets):
            await self.send(node_id, Settings(settings=settings))
            if firewall_changed:
                await self.send(node_id, self.firewall_for(node_id))

    def firewall_for(self, node_id: str) -> Firewall:
        """The `firewall` message for one connected node, from the settings now."""
        return firewall_message(self.settings, self._local.get(node_id, ""))

    # --- one agent's socket ---------------------------------------------------------

    async def _agent(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(heartbeat=PING_INTERVAL_S)
        await ws.prepare(request)
        transport = request.transport
        peercert = transport.get_extra_info("peercert") if transport is not None else None
        names = peer_names(peercert)
        shown = peer_not_after(peercert)
        register = await self._first_frame(ws, names, shown[0] if shown else "")
        if register is None:
            await ws.close()
            return ws
        node_id = register.node_id
        if shown is not None:
            self.certificates[node_id] = shown
        previous = self._sockets.get(node_id)
        self._sockets[node_id] = ws
        self._local[node_id] = _local_address(request)
        if previous is not None and previous is not ws:
            with contextlib.suppress(Exception):
                await previous.close()
        # Registered goes out before the node's replicas are acted upon, so any order
        # the registration prompts arrives after the agent knows it is registered.
        await ws.send_str(
            encode(
                Registered(
                    node_id=node_id, heartbeat_interval=self.heartbeat_interval, settings=self.settings
                )
            )
        )
        await ws.send_str(encode(self.firewall_for(node_id)))
        self._events.registered(register)
        try:
            async for frame in ws:
                if frame.type == aiohttp.WSMsgType.TEXT:
                    await self._received(node_id, ws, frame.data)
        finally:
            if self._sockets.get(node_id) is ws:
                del self._sockets[node_id]
                self._local.pop(node_id, None)
                self._events.disconnected(node_id)
        return ws

    async def _first_frame(self, ws: web.WebSocketResponse, names: set[str], serial: str) -> Register | None:
        message: AgentMessage | None = None
        refusal: Error
        try:
            first = await ws.receive(timeout=REGISTER_WAIT_S)
            if first.type == aiohttp.WSMsgType.TEXT:
                message = decode_from_agent(first.data)
        except AgentProtocolError as exc:
            refusal = Error(code="invalid", message=str(exc))
            await ws.send_str(encode(refusal))
            return None
        except TimeoutError:
            return None
        if not isinstance(message, Register):
            refusal = Error(code="unexpected", message="the first frame of a connection is register")
        elif message.version != PROTOCOL_VERSION:
            refusal = Error(code="version", message=f"this control plane speaks version {PROTOCOL_VERSION}")
        elif self.require_cert_name and message.node_id not in names:
            refusal = Error(
                code="refused", message=f"node {message.node_id!r} is not named by its certificate"
            )
        elif serial and serial in self.revoked:
            refusal = _revoked(message.node_id, serial)
        elif not self.accepting():
            refusal = _not_leader()
        else:
            return message
        if refusal.code == NOT_LEADER:
            log.info("an agent was sent on to the leader: this control plane stands by")
        else:
            log.warning("agent refused: %s", refusal.message)
        with contextlib.suppress(ConnectionError, RuntimeError):
            await ws.send_str(encode(refusal))
        return None

    async def _received(self, node_id: str, ws: web.WebSocketResponse, data: str) -> None:
        try:
            message = decode_from_agent(data)
        except AgentProtocolError as exc:
            log.warning("agent %s: %s", node_id, exc)
            with contextlib.suppress(ConnectionError, RuntimeError):
                await ws.send_str(encode(Error(code="invalid", message=str(exc))))
            return
        if isinstance(message, Heartbeat):
            self._events.heartbeat(node_id, message)
        elif isinstance(message, ReplicaState):
            self._events.replica_state(node_id, message)
        elif isinstance(message, FetchProgress):
            self._events.fetch_progress(node_id, message)
        elif isinstance(message, Error):
            log.warning("agent %s: %s: %s %s", node_id, message.code, message.message, message.replica_id)
            self._events.refused(node_id, message)
        else:
            with contextlib.suppress(ConnectionError, RuntimeError):
                await ws.send_str(encode(Error(code="unexpected", message="register is sent once")))


def _not_leader() -> Error:
    return Error(
        code=NOT_LEADER,
        message="this control plane does not hold the leader lease: dial the next server",
    )


def firewall_message(settings: NodeSettings, control_address: str = "") -> Firewall:
    """The table a node should have under `settings`: the engines' port range open to
    `control_address` (this control plane as the node reaches it; loopback and
    unspecified addresses add nothing) and `firewall_networks`."""
    networks = list(settings.firewall_networks)
    try:
        address: ipaddress.IPv4Address | ipaddress.IPv6Address | None = (
            ipaddress.ip_address(control_address) if control_address else None
        )
    except ValueError:  # not an IP socket: nothing to add
        address = None
    if address is not None:
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped  # a dual-stack listener's IPv4 peer
        if not (address.is_loopback or address.is_unspecified):
            networks.insert(0, str(address))
    return Firewall(enabled=settings.firewall, networks=tuple(networks), port_range=settings.port_range)


def _firewall_fields(settings: NodeSettings) -> tuple[object, ...]:
    return (settings.firewall, settings.firewall_networks, settings.port_range)


def _local_address(request: web.Request) -> str:
    """This end's address of the agent's connection, without an IPv6 zone."""
    transport = request.transport
    sockname = transport.get_extra_info("sockname") if transport is not None else None
    if not isinstance(sockname, tuple) or not sockname:
        return ""
    return str(sockname[0]).split("%", 1)[0]
