"""The admin listener's RSGI application: health, readiness, metrics, and the admin
API under `/api` when the server has a store (auth on, or a control plane).

`/debug/pprof/` is the profiler (llmgw.admin.debug_routes) when `debug_pprof` is on;
off, `/debug` answers 404 like any path not served.

`/healthz` answers while the process serves at all; `/readyz` once the gateway has
what it needs to route (its first round of replica scrapes is done), so a load
balancer adds it only then. `/metrics` is the Prometheus page; the same application
serves `metrics_listen`, where only `/metrics` is mounted.

`/dashboard` is the operator dashboard (llmgw.web.dashboard) where the admin API is
served, and `/` sends a browser there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from llmgw.http.responses import error_body
from llmgw.http.rsgi import App, HTTPProtocol, Scope

log = logging.getLogger(__name__)

AdminRoutes = App
"""An RSGI application mounted under `/api` (`llmgw.admin.api.AdminApi`)."""


class AdminApp:
    """Health, readiness, metrics, the admin API and the profiler; metrics only when
    `metrics_only`."""

    def __init__(
        self,
        registry: CollectorRegistry,
        ready: Callable[[], bool],
        *,
        metrics_only: bool = False,
        api: AdminRoutes | None = None,
        debug: AdminRoutes | None = None,
    ) -> None:
        self._registry = registry
        self._ready = ready
        self._metrics_only = metrics_only
        self._api = None if metrics_only else api
        self._debug = None if metrics_only else debug
        self.dashboard: AdminRoutes | None = None
        """`/dashboard` (and `/`), set by the server where the admin API is served."""

    async def __call__(self, scope: Scope, proto: HTTPProtocol) -> None:
        if scope.proto != "http":
            return
        path = scope.path
        if self._api is not None and (path == "/api" or path.startswith("/api/")):
            await self._api(scope, proto)
        elif self._debug is not None and (path == "/debug" or path.startswith("/debug/")):
            await self._debug(scope, proto)
        elif self.dashboard is not None and not self._metrics_only and _dashboard_path(path):
            await self.dashboard(scope, proto)
        elif path == "/metrics":
            proto.response_bytes(
                200, [("content-type", CONTENT_TYPE_LATEST)], generate_latest(self._registry)
            )
        elif path == "/healthz" and not self._metrics_only:
            proto.response_bytes(200, [("content-type", "text/plain")], b"ok\n")
        elif path == "/readyz" and not self._metrics_only:
            if self._ready():
                proto.response_bytes(200, [("content-type", "text/plain")], b"ready\n")
            else:
                proto.response_bytes(503, [("content-type", "text/plain")], b"not ready\n")
        else:
            why = f"{path} is not served here"
            if path.startswith("/api") and not self._metrics_only:
                why = (
                    "the admin API is served with auth on (auth.enabled: true) or a control plane, which "
                    "give the server a store; this one routes to static endpoints only"
                )
            elif (path == "/debug" or path.startswith("/debug/")) and not self._metrics_only:
                why = f"{path} is not served here: profiling is off (debug_pprof: true turns it on)"
            body = error_body(why, "not_found_error", code="unknown_route")
            proto.response_bytes(404, [("content-type", "application/json")], body)


def _dashboard_path(path: str) -> bool:
    return path in ("/", "/dashboard") or path.startswith("/dashboard/")
