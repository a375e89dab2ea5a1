"""The agent's end of the agent protocol: one WebSocket to the control plane, kept open.

A connection goes: dial (mutual TLS, or plaintext with --insecure), send `register`,
wait for `registered`, then, until the socket closes: heartbeats every interval the
control plane asked for, queued with the node's other messages (state changes, download
progress) and written in order by one writer; and orders received and handed to the
node. When the socket closes, or cannot be opened, the agent waits and dials again, the
wait doubling from RECONNECT_BASE_S to RECONNECT_MAX_S with jitter (so a restarted
control plane is not hit by every agent in the same instant), and back to the start
once a connection registers. The engines keep running throughout: nothing here touches
them.

With several control planes (`--server A:P1,B:P2`, servers sharing one store), only the
one holding the leader lease accepts agents; the others answer `register` with `error`
code `not_leader` and close. The agent then dials the next address at once, and waits
only once every address has failed in a round. A round in which some server answered
`not_leader` waits at most FOLLOWER_RETRY_MAX_S: a live server said a leader exists or
is about to (the lease decides within its ttl), and the new leader gives agents only
`unreachable_after` to come back before it places replicas anew.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import ssl
from collections.abc import Callable, Sequence
from datetime import timedelta

import aiohttp

from llmgw.agent.node import Node
from llmgw.errors import AgentError, AgentProtocolError
from llmgw.protocol.messages import (
    AGENT_PATH,
    NOT_LEADER,
    PROTOCOL_VERSION,
    Error,
    Registered,
    decode_from_control,
    encode,
)

log = logging.getLogger(__name__)

RECONNECT_BASE_S = 0.5
RECONNECT_MAX_S = 30.0
JITTER = 0.25
"""The largest fraction taken off a wait at random."""
REGISTER_TIMEOUT_S = 30.0
"""How long the control plane may take to answer `register`."""
PING_INTERVAL_S = 20.0
"""WebSocket pings, which find a dead peer behind a silent network faster than TCP."""
FOLLOWER_RETRY_MAX_S = 1.0
"""The longest wait after a round of dials in which a server answered `not_leader`."""


class NotLeader(AgentProtocolError):
    """The control plane dialled does not hold the leader lease."""


def reconnect_delay(attempt: int, rng: Callable[[], float] = random.random) -> float:
    """Seconds to wait before dial number `attempt` (0 is the first retry)."""
    base = min(RECONNECT_MAX_S, RECONNECT_BASE_S * float(2 ** min(attempt, 30)))
    return base * (1 - JITTER * rng())


def round_delay(round_: int, *, follower_answered: bool, rng: Callable[[], float] = random.random) -> float:
    """Seconds to wait after round number `round_` (0 is the first) of dials in which
    every address failed: the reconnect backoff, capped where a server answered that it
    does not lead (a leader exists, or will within the lease's ttl)."""
    delay = reconnect_delay(round_, rng)
    return min(delay, FOLLOWER_RETRY_MAX_S) if follower_answered else delay


def agent_url(server: str, secure: bool) -> str:
    """The WebSocket URL of a control plane given as host:port."""
    host, sep, port = server.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise AgentError(f"--server {server!r}: give the control plane's agent port as host:port")
    return f"{'wss' if secure else 'ws'}://{server}{AGENT_PATH}"


def agent_urls(servers: str | Sequence[str], secure: bool) -> list[str]:
    """The WebSocket URLs of the control planes given as `host:port[,host:port...]`
    (or as a list of host:port), in the order given."""
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    named = [item.strip() for item in items if item.strip()]
    if not named:
        raise AgentError("--server is empty: give the control plane's agent port as host:port")
    return [agent_url(server, secure) for server in named]


class AgentLink:
    """Keeps one agent connected to the control plane that leads, among `servers`
    (`host:port`, comma-separated, or a list of them)."""

    def __init__(
        self,
        node: Node,
        session: aiohttp.ClientSession,
        servers: str | Sequence[str],
        *,
        ssl_context: ssl.SSLContext | None,
        server_hostname: str = "",
        rng: Callable[[], float] = random.random,
    ) -> None:
        self.node = node
        self.session = session
        self.urls = agent_urls(servers, ssl_context is not None)
        self.current = 0
        """The index in `urls` dialled now, or next."""
        self.ssl_context = ssl_context
        self.server_hostname = server_hostname or None
        self.rng = rng
        self.connected = asyncio.Event()
        self.registrations = 0

    @property
    def url(self) -> str:
        return self.urls[self.current]

    async def run(self, stop: asyncio.Event) -> None:
        """Connects, and reconnects, until `stop` is set: each round dials every address
        once, starting with the one that served last, and waits only after a round in
        which none registered."""
        round_ = 0
        while not stop.is_set():
            follower_answered = False
            registered = False
            for _ in range(len(self.urls)):
                before = self.registrations
                try:
                    await self._connection(stop)
                except NotLeader as exc:
                    follower_answered = True
                    log.info("control plane %s: %s", self.url, exc)
                except (aiohttp.ClientError, OSError, TimeoutError, AgentProtocolError) as exc:
                    log.warning("control plane %s: %s", self.url, exc or type(exc).__name__)
                finally:
                    self.connected.clear()
                if stop.is_set():
                    return
                if self.registrations > before:
                    # It served, then the connection ended: this server is dialled first
                    # again (a blip), after the shortest wait.
                    registered = True
                    break
                self.current = (self.current + 1) % len(self.urls)
            round_ = 0 if registered else round_ + 1
            delay = round_delay(max(round_ - 1, 0), follower_answered=follower_answered, rng=self.rng)
            log.info("control plane %s: dialling again in %.1fs", self.url, delay)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), delay)

    async def _connection(self, stop: asyncio.Event) -> None:
        """One connection, from dial to close."""
        ssl_arg: ssl.SSLContext | bool = self.ssl_context if self.ssl_context is not None else False
        async with self.session.ws_connect(
            self.url,
            ssl=ssl_arg,
            server_hostname=self.server_hostname,
            heartbeat=PING_INTERVAL_S,
            timeout=aiohttp.ClientWSTimeout(ws_close=5.0),
        ) as ws:
            self.node.reset_outbox()
            await ws.send_str(encode(self.node.register_message()))
            registered = await self._await_registered(ws)
            self.node.handle(registered)
            self.registrations += 1
            self.connected.set()
            log.info("control plane %s: registered as %s", self.url, registered.node_id)
            interval = registered.heartbeat_interval
            tasks = [
                asyncio.create_task(self._heartbeats(interval)),
                asyncio.create_task(self._send_queued(ws)),
                asyncio.create_task(self._receive(ws)),
                asyncio.create_task(stop.wait()),
            ]
            try:
                done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in tasks:
                    task.cancel()
                for task in tasks:
                    with contextlib.suppress(asyncio.CancelledError, aiohttp.ClientError, ConnectionError):
                        await task
            for task in done:
                if not task.cancelled() and task.exception() is not None:
                    log.warning("control plane %s: connection ended: %s", self.url, task.exception())

    async def _await_registered(self, ws: aiohttp.ClientWebSocketResponse) -> Registered:
        frame = await ws.receive(timeout=REGISTER_TIMEOUT_S)
        if frame.type != aiohttp.WSMsgType.TEXT:
            raise AgentProtocolError(
                f"the control plane closed the connection instead of registering ({frame.type})"
            )
        message = decode_from_control(frame.data)
        if isinstance(message, Error):
            kind = NotLeader if message.code == NOT_LEADER else AgentProtocolError
            raise kind(f"the control plane refused registration: {message.code}: {message.message}")
        if not isinstance(message, Registered):
            raise AgentProtocolError(f"the control plane answered register with {message.type}")
        if message.version != PROTOCOL_VERSION:
            raise AgentProtocolError(
                f"the control plane speaks agent protocol {message.version}, this agent"
                f" {PROTOCOL_VERSION}: upgrade the older of the two"
            )
        return message

    async def _heartbeats(self, interval: timedelta) -> None:
        # Heartbeats join the node's queue rather than being written directly: with one
        # writer, a heartbeat never overtakes a state change queued before it, and the
        # control plane sees every replica's states in the order they happened.
        seq = 0
        while True:
            await asyncio.sleep(interval / timedelta(seconds=1))
            seq += 1
            self.node.emit(self.node.heartbeat_message(seq))

    async def _send_queued(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        while True:
            message = await self.node.outbox.get()
            await ws.send_str(encode(message))

    async def _receive(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        async for frame in ws:
            if frame.type != aiohttp.WSMsgType.TEXT:
                continue
            try:
                message = decode_from_control(frame.data)
            except AgentProtocolError as exc:
                log.warning("control plane %s: %s", self.url, exc)
                await ws.send_str(encode(Error(code="invalid", message=str(exc))))
                continue
            self.node.handle(message)
