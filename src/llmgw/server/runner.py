"""Running the gateway: its listeners in one event loop, until told to stop.

The client port, the admin port and the optional metrics port are llmgw's own
HTTP/1.1 servers (llmgw.http.http1_server) on this process's asyncio loop (uvloop),
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
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from llmgw.admin import token as admin_token
from llmgw.admin.account import AccountKeys
from llmgw.admin.api import AdminApi
from llmgw.admin.debug_routes import DebugRoutes
from llmgw.auth import AuthGate
from llmgw.auth.spill import spill_path
from llmgw.batch.eval_routes import EvalRoutes
from llmgw.batch.eval_run import EvalResult, EvalResults
from llmgw.batch.responses_runtime import responses_app, sweep
from llmgw.config import Settings
from llmgw.config.inert import inert_in_use
from llmgw.config.values import split_host_port
from llmgw.core.events import NO_EVENTS, EventSink
from llmgw.guard.attachments import GuardRoutes
from llmgw.http.body_guard import BodyRules
from llmgw.http.http1 import App, Limits
from llmgw.http.http1_server import Http1Server
from llmgw.http.rsgi import App as RsgiApp
from llmgw.http.rsgi import HTTPProtocol, Scope
from llmgw.identity import IdentityApp, build_identity, purge_loop
from llmgw.obs.tracing import build_traces
from llmgw.router.admin_routes import RouterRoutes
from llmgw.secrets.runtime import SecretsRuntime, open_secrets
from llmgw.server import heap, notify
from llmgw.server.backups import start_backups
from llmgw.server.batch import batch_service
from llmgw.server.control import start_control
from llmgw.server.gateway import Gateway, scim_mounts
from llmgw.store import Store
from llmgw.store.cluster_secret import check_sealed
from llmgw.web import WebApp
from llmgw.web.chat import PAGE as CHAT_PAGE
from llmgw.web.chat import ChatPage
from llmgw.web.dashboard import Dashboard

if TYPE_CHECKING:
    from llmgw.obs.provider import Traces

log = logging.getLogger(__name__)


# How long a stop waits for requests in flight (streams included) before cutting them.
STOP_GRACE_S = 30.0


def _server(
    app: App,
    address: str,
    max_connections: int,
    limits: Limits | None = None,
    on_refused: Callable[[int, str], None] | None = None,
) -> Http1Server:
    host, port = split_host_port(address)  # checked when the settings loaded
    return Http1Server(
        app, host, port, max_connections=max_connections, backlog=2048, limits=limits, on_refused=on_refused
    )


def client_limits(settings: Settings) -> Limits:
    """The client port's limits: its body deadline, rate and memory from `router`."""
    router = settings.router
    return Limits(
        body=BodyRules(
            timeout_s=router.timeouts.body.total_seconds(),
            min_rate=router.timeouts.body_min_rate,
            memory_bytes=router.max_body_memory_bytes,
            max_body_bytes=router.max_body_bytes,
        )
    )


def listeners(settings: Settings, gateway: Gateway) -> list[Http1Server]:
    """The servers for `listen`, `admin_listen` and `metrics_listen` (the settings
    already refused an admin address off loopback without admin_remote); only the
    client port is capped at `max_connections`."""
    servers = [
        _server(
            gateway.app,
            settings.listen,
            settings.max_connections,
            client_limits(settings),
            # What the HTTP server refuses on the client port (not valid HTTP, a body
            # late or over the memory budget, an application failure) counts too.
            on_refused=gateway.refused_by_server,
        ),
        _server(gateway.admin, settings.admin_listen, 0),
    ]
    if settings.metrics_listen:
        servers.append(_server(gateway.metrics_app, settings.metrics_listen, 0))
    return servers


@dataclass(frozen=True)
class Tenancy:
    """What the store brings to a server: the store itself, the admin API and, with auth
    on, the gate."""

    store: Store
    gate: AuthGate | None
    api: AdminApi


def eval_routes(settings: Settings, gateway: Gateway) -> EvalRoutes:
    """`/api/eval`: suites run through the gateway's own path; a result under a model's
    gate holds it back as a canary candidate (llmgw.router.canary)."""

    def gate(result: EvalResult) -> None:
        model = gateway.catalog.resolve(result.model)
        if model is None or model.eval is None:
            return
        why = f"score {result.score.score:.2f} on {result.suite} under min_score {result.min_score:g}"
        gateway.canaries.eval_result(result.model, result.passed, why)

    async def pinned(scope: Scope, proto: HTTPProtocol) -> None:
        await gateway.app.serve_as(scope, proto, None, None, pinned=True)

    return EvalRoutes(pinned, lambda: gateway.catalog, settings.control.eval_dir, EvalResults(gate))


def _passed(results: EvalResults) -> Callable[[str], bool | None]:
    def passed(name: str) -> bool | None:
        last = results.last(name)
        return None if last is None else last.passed

    return passed


def needs_store(settings: Settings) -> bool:
    """Auth keeps keys and usage in the store; the control plane its runtime catalog,
    lease and secret; webhooks their deliveries. A canary needs the admin API (where an
    operator resets a rolled-back candidate), which the store brings, and so does an
    eval gate (where `llmgw ctl eval` runs it). A router-only
    server without any of those has nothing to keep."""
    return (
        settings.auth.enabled
        or settings.control_plane_mode
        or bool(settings.notify.webhooks)
        or any(m.canary is not None and m.canary.model for m in settings.models)
        or any(m.eval is not None for m in settings.models)
    )


def needs_admin_token(settings: Settings) -> bool:
    """The admin API is behind the token, and so is the profiler (`debug_pprof`), which a
    server without a store may serve too."""
    return needs_store(settings) or settings.debug_pprof


@contextlib.contextmanager
def _run_directory(settings: Settings, config_dir: Path | None) -> Iterator[Path | None]:
    """Where the defaults of the store and the admin token live: beside the configuration,
    or in the service's state directory. A server given neither (the embedded defaults)
    gets a directory for this run only, removed as it stops, rather than writing into
    whatever directory it was started from."""
    if config_dir is not None or os.environ.get("STATE_DIRECTORY") or not needs_admin_token(settings):
        yield config_dir
        return
    if settings.admin_token_file and (settings.auth.store or not needs_store(settings)):
        yield config_dir
        return
    with tempfile.TemporaryDirectory(prefix="llmgw-server-") as folder:
        yield Path(folder)


@contextlib.asynccontextmanager
async def _tenancy(
    settings: Settings, config_dir: Path | None, token: str | None
) -> AsyncIterator[Tenancy | None]:
    """With auth on or a control plane: the store opened (and upgraded) and the admin API
    behind `token`; with auth on, the gate started with every key read too. All closed
    again on the way out."""
    if not needs_store(settings) or token is None:
        yield None
        return
    state_directory = os.environ.get("STATE_DIRECTORY")
    location = settings.effective_store(config_dir, state_directory)
    store = await Store.open(location)
    try:
        spill = spill_path(state_directory, config_dir)
        gate = AuthGate(settings, store, spill=spill) if settings.auth.enabled else None
        if gate is not None:
            await gate.start()
        try:
            log.info("admin API on %s/api", settings.admin_listen)
            yield Tenancy(store, gate, AdminApi(settings, store, token, gate))
        finally:
            if gate is not None:
                await gate.close()
    finally:
        await store.close()


def _dashboard(settings: Settings, token: str, tenancy: Tenancy, gateway: Gateway) -> Dashboard:
    """The operator dashboard on admin_listen, over the admin API's own handler."""
    api = tenancy.api
    dashboard = Dashboard(settings, token, api.handle, gateway.metrics, tenancy.store.audit)
    dashboard.models = gateway.models_view.list
    dashboard.has_control = lambda: api.control is not None
    return dashboard


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
    with _run_directory(settings, config_dir) as run_dir:
        await _serve(settings, stop, run_dir)


def _admin_token(settings: Settings, config_dir: Path | None) -> str | None:
    """The admin token, made at first start, when something on the admin port needs it."""
    if not needs_admin_token(settings):
        return None
    token_file = settings.effective_admin_token_file(config_dir, os.environ.get("STATE_DIRECTORY"))
    token = admin_token.load_or_create(token_file)
    log.info("the admin token is in %s", token_file)
    return token


def _debug_routes(settings: Settings, token: str | None) -> DebugRoutes | None:
    if not settings.debug_pprof or token is None:
        return None
    log.warning(
        "debug_pprof is on: %s/debug/pprof/ serves CPU profiles, task stacks and heap samples "
        "(which can show keys and prompts) to whoever holds the admin token",
        settings.admin_listen,
    )
    return DebugRoutes(token)


def _identity(
    settings: Settings, tenancy: Tenancy | None, config_dir: Path | None, secrets: SecretsRuntime
) -> IdentityApp | None:
    """With auth on, the sign-in routes (/auth, and /signup when it is open)."""
    if tenancy is None or not settings.auth.enabled:
        return None
    return build_identity(settings.auth, tenancy.store, config_dir=config_dir, vault=secrets.vault_values)


@contextlib.asynccontextmanager
async def _traces(settings: Settings) -> AsyncIterator[Traces | None]:
    """The server's tracer provider when `tracing` (or OTEL_*) names a collector; its
    last spans are exported as the server stops, off the event loop."""
    traces = build_traces(settings.tracing, os.environ)
    if traces is None:
        yield None
        return
    log.info("tracing: spans exported over OTLP/%s", settings.tracing.protocol)
    try:
        yield traces
    finally:
        await asyncio.to_thread(traces.close)


def people_routes(settings: Settings, tenancy: Tenancy, identity: IdentityApp) -> list[tuple[str, RsgiApp]]:
    """The admin API for signed-in people and their keys page, for the client port: a
    session, never the admin token, is taken there."""
    people = AdminApi(settings, tenancy.store, None, tenancy.gate, sessions=identity.sessions)
    return [("/api", people), ("/account", AccountKeys(people, identity.sessions, settings.auth))]


async def _serve(settings: Settings, stop: asyncio.Event, config_dir: Path | None) -> None:
    # Every secret is had (and Vault logged in to) before anything listens.
    secrets = await open_secrets(settings, config_dir)
    try:
        await _serve_with(settings, stop, config_dir, secrets)
    finally:
        await secrets.close()


async def _serve_with(
    settings: Settings, stop: asyncio.Event, config_dir: Path | None, secrets: SecretsRuntime
) -> None:
    webhooks = notify.hooks(settings, config_dir, secrets.vault_values)
    token = _admin_token(settings, config_dir)
    async with (
        _traces(settings) as traces,
        _tenancy(settings, config_dir, token) as tenancy,
        responses_app(
            settings,
            tenancy.store if tenancy is not None else None,
            tenancy.gate if tenancy is not None else None,
            config_dir,
        ) as responses,
    ):
        if tenancy is not None:
            await check_sealed(tenancy.store.engine, secrets.sealer)
        api = tenancy.api if tenancy is not None else None
        identity = _identity(settings, tenancy, config_dir, secrets)
        mounts: list[tuple[str, RsgiApp]] = (
            [(prefix, identity) for prefix in identity.prefixes] if identity is not None else []
        )
        if tenancy is not None:
            mounts += scim_mounts(settings, tenancy.store, tenancy.gate, config_dir, secrets.vault_values)
        if identity is not None and tenancy is not None:
            mounts += people_routes(settings, tenancy, identity)
        mounts += [(prefix, responses) for prefix in responses.prefixes]
        # The landing page and docs portal: mounted, so the API's routes never pass them.
        web = WebApp(
            settings,
            sessions=identity.sessions if identity is not None else None,
            gate=tenancy.gate if tenancy is not None else None,
        )
        mounts += [(prefix, web) for prefix in web.prefixes]
        # The chat page: signed-in people, through the gateway's own path as their key.
        gate = tenancy.gate if tenancy is not None else None
        chat = (
            ChatPage(settings, identity.sessions, gate)
            if identity is not None and gate is not None and settings.auth.oidc.enabled
            else None
        )
        if chat is not None:
            mounts.append((CHAT_PAGE, chat))
        batches = (
            batch_service(settings, tenancy.store, tenancy.gate, config_dir) if tenancy is not None else None
        )
        if batches is not None:
            mounts += batches.mounts()
        gateway = Gateway(
            settings,
            auth=tenancy.gate if tenancy is not None else None,
            admin_api=api,
            debug=_debug_routes(settings, token),
            mounts=mounts,
            vault=secrets.vault_values,
            traces=traces,
        )
        # The Responses API runs its chat completions through the client port's own path.
        responses.chat = gateway.app
        web.models = gateway.models_view.list
        if chat is not None:
            chat.models = gateway.models_view.list
            chat.serve_as = gateway.app.serve_as
        if api is not None:
            # The report follows the catalog in force, runtime changes included.
            api.inert = lambda: inert_in_use(settings, gateway.catalog)
            api.router = RouterRoutes(gateway.endpoints, gateway.clock, canaries=gateway.canaries)
            api.evals = eval_routes(settings, gateway)
            if token is not None and tenancy is not None:
                gateway.admin.dashboard = _dashboard(settings, token, tenancy, gateway)
        servers = listeners(settings, gateway)
        for server in servers:
            await server.start()
        background = await gateway.background()
        if batches is not None:
            batches.attach(gateway.app.serve_as)
            background += await batches.start()
        if tenancy is not None:
            background.append(await _guard_attachments(settings, gateway, tenancy))
        if identity is not None:
            background.append(asyncio.create_task(purge_loop(identity), name="session-purge"))
        if responses.ctx.repo is not None:
            background.append(asyncio.create_task(sweep(responses.ctx.repo), name="responses-sweep"))
        events: EventSink = NO_EVENTS
        if tenancy is not None:
            outbox, notify_routes, outbox_task = notify.start_outbox(webhooks, tenancy.store, gateway)
            background.append(outbox_task)
            tenancy.api.notify = notify_routes
            events = outbox
            if tenancy.gate is not None:
                tenancy.gate.events = outbox
            gateway.canaries.events = outbox
        scheduled = start_backups(settings, gateway, config_dir, events)
        if scheduled is not None:
            background.append(scheduled)
        control = await start_control(
            settings,
            gateway,
            tenancy.store if tenancy is not None else None,
            config_dir,
            secrets.sealer,
            events,
        )
        if api is not None and control is not None:
            api.control = control.routes
            if control.routes is not None and api.evals is not None:
                # `ctl model promote` asks this gateway's last eval result of the candidate.
                control.routes.eval_passed = _passed(api.evals.results)
        heap.settle()
        log.info("llmgw serving the OpenAI API on %s, admin on %s", settings.listen, settings.admin_listen)
        try:
            await stop.wait()
        finally:
            await asyncio.gather(*(s.stop(STOP_GRACE_S) for s in servers), return_exceptions=True)
            if batches is not None:
                await batches.close()
            if control is not None:
                await control.close()
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            # Usage handed over by the last requests reaches the gate before it closes.
            gateway.close()
            if identity is not None:
                await identity.close()
