"""Running the gateway: its listeners in one event loop, until told to stop.

The client port, the admin port and the optional metrics port are llmgw's own
HTTP/1.1 servers (llmgw.server.http1_server) on this process's asyncio loop (uvloop),
beside the background loops (scraping, accounting), so all of them share the
gateway's state without locks.
SIGTERM and SIGINT stop it: listeners close, requests in flight finish, usage
already handed over is accounted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from llmgw.auth import AdminApi, AuthGate, admin_token
from llmgw.config import Settings
from llmgw.guard.attachments import GuardRoutes
from llmgw.server import heap
from llmgw.server.control import start_control
from llmgw.server.gateway import Gateway
from llmgw.server.http1 import App
from llmgw.server.http1_server import Http1Server
from llmgw.server.listen import split_listen
from llmgw.store import Store

log = logging.getLogger(__name__)


# How long a stop waits for requests in flight (streams included) before cutting them.
STOP_GRACE_S = 30.0


def _server(app: App, address: str, field: str, max_connections: int) -> Http1Server:
    host, port = split_listen(address, field)
    return Http1Server(app, host, port, max_connections=max_connections, backlog=2048)


def listeners(settings: Settings, gateway: Gateway) -> list[Http1Server]:
    """The servers for `listen`, `admin_listen` and `metrics_listen` (the settings
    already refused an admin address off loopback without admin_remote); only the
    client port is capped at `max_connections`."""
    servers = [
        _server(gateway.app, settings.listen, "listen", settings.max_connections),
        _server(gateway.admin, settings.admin_listen, "admin_listen", 0),
    ]
    if settings.metrics_listen:
        servers.append(_server(gateway.metrics_app, settings.metrics_listen, "metrics_listen", 0))
    return servers


@dataclass(frozen=True)
class Tenancy:
    """What auth brings to a server: its store, the gate and the admin API."""

    store: Store
    gate: AuthGate
    api: AdminApi


@contextlib.asynccontextmanager
async def _auth(settings: Settings, config_dir: Path | None) -> AsyncIterator[Tenancy | None]:
    """With auth on: the store opened (and upgraded), the gate started with every key
    read, and the admin API behind its token; all closed again on the way out."""
    if not settings.auth.enabled:
        yield None
        return
    store = await Store.open(settings.auth.store)
    try:
        gate = AuthGate(settings, store)
        await gate.start()
        try:
            token_file = settings.effective_admin_token_file(config_dir, os.environ.get("STATE_DIRECTORY"))
            token = admin_token.load_or_create(token_file)
            log.info("admin API on %s/api; its token is in %s", settings.admin_listen, token_file)
            yield Tenancy(store, gate, AdminApi(settings, store, token, gate))
        finally:
            await gate.close()
    finally:
        await store.close()


async def _guard_attachments(settings: Settings, gateway: Gateway, tenancy: Tenancy) -> asyncio.Task[None]:
    """Guard attachments read from the store now, kept fresh by a background task, and
    changed through `/api/guard`."""
    routes = GuardRoutes(settings.guard, gateway.guard, tenancy.store)
    await routes.refresh()
    tenancy.api.guard = routes
    interval_s = max(settings.auth.effective_cache_ttl.total_seconds() / 2, 0.05)
    return asyncio.create_task(routes.run(interval_s), name="guard-attachments")


async def serve(
    settings: Settings, stop: asyncio.Event | None = None, config_dir: Path | None = None
) -> None:
    """Runs the gateway until `stop` is set or a SIGTERM/SIGINT arrives. `config_dir`
    is where a relative admin_token_file default lives (beside the configuration)."""
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with _auth(settings, config_dir) as tenancy:
        api = tenancy.api if tenancy is not None else None
        gateway = Gateway(settings, auth=tenancy.gate if tenancy is not None else None, admin_api=api)
        servers = listeners(settings, gateway)
        for server in servers:
            await server.start()
        background = await gateway.background()
        if tenancy is not None:
            background.append(await _guard_attachments(settings, gateway, tenancy))
        control = await start_control(
            settings, gateway, tenancy.store if tenancy is not None else None, config_dir
        )
        if api is not None and control is not None:
            api.control = control.routes
        heap.settle()
        log.info("llmgw serving the OpenAI API on %s, admin on %s", settings.listen, settings.admin_listen)
        try:
            await stop.wait()
        finally:
            await asyncio.gather(*(s.stop(STOP_GRACE_S) for s in servers), return_exceptions=True)
            if control is not None:
                await control.close()
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            # Usage handed over by the last requests reaches the gate before it closes.
            gateway.close()
