"""Running a sim engine as a process: sockets, the ready line, signals, and exits.

The process binds its ports first (port 0 picks a free one), then prints one line on
stdout, `llmgw sim-engine listening url=http://HOST:PORT admin_url=... pid=...`, which
is how a parent learns the ports without racing for them; readiness is then polled on
`/health` (503 during `--startup-delay`). SIGTERM or SIGINT stops it with status 0; the
exit-after fault ends it with status 3 at once, the way a crashing engine goes.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys

import uvloop
from aiohttp import web

from llmgw.sim.app import create_admin_app, create_app
from llmgw.sim.kv_publisher import KVEventPublisher
from llmgw.sim.options import FaultMode, SimOptions
from llmgw.sim.state import SimState

READY_PREFIX = "llmgw sim-engine listening"
# A stopping sim gives streams in flight this long; hung ones (fault modes) are then cut.
_SHUTDOWN_S = 1.0


def _bind(host: str, port: int) -> socket.socket:
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    return sock


def _url(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


class SocketListener:
    """The main port: open, or closed so that connections to it are refused."""

    def __init__(self, runner: web.AppRunner, host: str, port: int) -> None:
        self._runner = runner
        self._host = host
        self.port = port
        self._site: web.SockSite | None = None

    @property
    def is_open(self) -> bool:
        return self._site is not None

    async def open(self) -> None:
        if self._site is not None:
            return
        sock = _bind(self._host, self.port)
        self.port = sock.getsockname()[1]
        site = web.SockSite(self._runner, sock)
        await site.start()
        self._site = site

    async def close(self) -> None:
        if self._site is None:
            return
        site, self._site = self._site, None
        await site.stop()
        server = self._runner.server
        if server is not None:
            # Idle keep-alive connections close too, so a pooled client is refused
            # rather than served; requests in flight finish.
            for connection in server.connections:
                connection.close()


def _exit_now(status: int) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


async def serve(options: SimOptions) -> None:
    """Run until SIGTERM or SIGINT."""
    state = SimState.build(options, exit_process=_exit_now)
    runner = web.AppRunner(
        create_app(state), handler_cancellation=True, access_log=None, shutdown_timeout=_SHUTDOWN_S
    )
    await runner.setup()
    listener = SocketListener(runner, options.host, options.port)
    await listener.open()
    state.listener = listener
    admin_runner: web.AppRunner | None = None
    admin_url = ""
    if options.admin_port is not None:
        admin_runner = web.AppRunner(create_admin_app(state), access_log=None, shutdown_timeout=_SHUTDOWN_S)
        await admin_runner.setup()
        admin = SocketListener(admin_runner, options.host, options.admin_port)
        await admin.open()
        admin_url = _url(options.host, admin.port)
    publisher: KVEventPublisher | None = None
    if options.kv_events_port is not None:
        publisher = KVEventPublisher(
            state.engine.pool, options.host, options.kv_events_port, options.block_size
        )
        publisher.start()
    print(
        f"{READY_PREFIX} url={_url(options.host, listener.port)} admin_url={admin_url or '-'} "
        f"flavor={options.flavor.value} pid={os.getpid()}",
        flush=True,
    )
    if options.fault is FaultMode.REFUSE:
        await listener.close()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        if publisher is not None:
            await publisher.close()
        await listener.close()
        if admin_runner is not None:
            await admin_runner.cleanup()
        await runner.cleanup()


def run(options: SimOptions) -> None:
    """Run a sim engine in this process, on uvloop (the stack the gateway uses too)."""
    uvloop.run(serve(options))
