"""A listening socket serving an RSGI-shaped application with llmgw's HTTP/1.1
connections (llmgw.http.http1), on the running loop.

The socket is accepted from by hand rather than through `loop.create_server` so that
accepting can pause: past `max_connections` new clients wait in the kernel's listen
backlog (they are neither refused nor accepted-then-dropped) until a connection closes.

Its connections share one budget for the request bodies they hold, and one sweep
checks their bodies' deadlines (llmgw.http.body_guard).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable

from llmgw.http.body_guard import SWEEP_S, BodyBudget
from llmgw.http.http1 import App, ConnectionOwner, Http1Connection, Limits
from llmgw.http.http1_exchange import DateHeader
from llmgw.http.responses import CONNECTION_REASONS

log = logging.getLogger(__name__)

# Connections taken per readiness event, so a flood of them does not starve the loop.
_ACCEPT_BATCH = 64


class Http1Server(ConnectionOwner):
    """`start()` binds and serves; `stop()` stops accepting, lets the requests in flight
    finish within its grace, and closes every connection."""

    def __init__(
        self,
        app: App,
        host: str,
        port: int,
        *,
        max_connections: int = 0,
        backlog: int = 2048,
        limits: Limits | None = None,
        sweep_s: float = SWEEP_S,
        on_refused: Callable[[int, str], None] | None = None,
    ) -> None:
        self._app = app
        # Told of each request the server answers itself, with its status and reason
        # (llmgw.http.responses.CONNECTION_REASONS): the gateway counts them.
        self._on_refused = on_refused
        self._host = host
        self._port = port
        self._max_connections = max_connections
        self._backlog = backlog
        self._limits = limits or Limits()
        self._date = DateHeader()
        self.budget = BodyBudget(self._limits.body.memory_bytes)
        """The request body bytes this listener's connections hold."""
        self._sweeper: asyncio.Task[None] | None = None
        self._sweep_s = sweep_s
        self._sock: socket.socket | None = None
        self._accepting = False
        self._connections: set[Http1Connection] = set()
        self._connecting: set[asyncio.Task[None]] = set()
        self._all_closed: asyncio.Event | None = None

    @property
    def port(self) -> int:
        """The bound port (the one asked for, or the kernel's pick for 0)."""
        if self._sock is None:
            return self._port
        return int(self._sock.getsockname()[1])

    @property
    def connections(self) -> int:
        return len(self._connections) + len(self._connecting)

    async def start(self) -> None:
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        self._sock = socket.create_server(
            (self._host, self._port), family=family, backlog=self._backlog, reuse_port=False
        )
        self._sock.setblocking(False)
        self._resume_accepting()
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep())

    async def stop(self, grace_s: float = 30.0) -> None:
        """Stops accepting; idle connections close now, busy ones after their answer;
        what is still running after `grace_s` is cancelled and its connection dropped."""
        # Set before the first await: a connection closing meanwhile must not resume
        # accepting on the socket closed here.
        self._all_closed = asyncio.Event()
        self._pause_accepting()
        if self._sock is not None:
            self._sock.close()
        if self._sweeper is not None:
            self._sweeper.cancel()
            await asyncio.gather(self._sweeper, return_exceptions=True)
            self._sweeper = None
        for task in list(self._connecting):
            task.cancel()
        await asyncio.gather(*self._connecting, return_exceptions=True)
        for conn in list(self._connections):
            conn.shutdown()
        if self._connections:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._all_closed.wait(), grace_s)
        for conn in list(self._connections):
            conn.abort()
        tasks = [conn.task for conn in self._connections if conn.task is not None]
        await asyncio.gather(*tasks, return_exceptions=True)

    # --- ConnectionOwner ----------------------------------------------------------------

    def opened(self, conn: Http1Connection) -> None:
        self._connections.add(conn)

    def refused(self, status: int) -> None:
        if self._on_refused is not None:
            self._on_refused(status, CONNECTION_REASONS.get(status, "internal"))

    def closed(self, conn: Http1Connection) -> None:
        self._connections.discard(conn)
        if self._all_closed is not None:
            if not self._connections:
                self._all_closed.set()
        elif not self._accepting and self._below_limit():
            self._resume_accepting()

    async def _sweep(self) -> None:
        """Checks every connection's body against its deadline, every `sweep_s`."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self._sweep_s)
            now = loop.time()
            for conn in list(self._connections):
                conn.check_body(now)

    # --- accepting ----------------------------------------------------------------------

    def _below_limit(self) -> bool:
        return self._max_connections <= 0 or self.connections < self._max_connections

    def _resume_accepting(self) -> None:
        if self._sock is not None and not self._accepting:
            self._accepting = True
            asyncio.get_running_loop().add_reader(self._sock.fileno(), self._accept)

    def _pause_accepting(self) -> None:
        if self._sock is not None and self._accepting:
            self._accepting = False
            asyncio.get_running_loop().remove_reader(self._sock.fileno())

    def _accept(self) -> None:
        assert self._sock is not None
        loop = asyncio.get_running_loop()
        for _ in range(_ACCEPT_BATCH):
            if not self._below_limit():
                self._pause_accepting()
                return
            try:
                client, _address = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                # Out of file descriptors and the like: the client waits in the backlog
                # and is retried on the next readiness event.
                log.warning("accepting a connection failed: %s", exc)
                return
            client.setblocking(False)
            task = loop.create_task(self._connect(client))
            self._connecting.add(task)
            task.add_done_callback(self._connected)

    def _connected(self, task: asyncio.Task[None]) -> None:
        self._connecting.discard(task)
        if self._all_closed is None and not self._accepting and self._below_limit():
            self._resume_accepting()

    async def _connect(self, client: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        try:
            await loop.connect_accepted_socket(
                lambda: Http1Connection(self._app, self, self._limits, self._date, self.budget), client
            )
        except OSError:
            client.close()
