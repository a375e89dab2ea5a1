"""The gateway's routing state for operators, under `/api/router` behind the admin token:

    GET  /api/router/replicas   every endpoint the gateway routes to: its breaker
                                (closed, open, half_open), consecutive failures,
                                requests in flight, and its last failed try
    GET  /api/router/canaries   every canary: its split, both sides' figures over the
                                window, a rollback with its figures (llmgw.router.canary)
    GET  /api/router/canaries/<model>         one, with `lines` for `llmgw ctl explain`
    POST /api/router/canaries/<model>/reset   the operator's word: a rolled-back
                                              candidate gets its split again

The control plane knows which replicas it started and their phase; only the gateway
knows whether it can actually use one (a replica with the wrong engine key is running
and healthy to the control plane, and refuses every request). `llmgw ctl replicas`
shows both side by side. Nothing here carries an engine key.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from llmgw.errors import MethodNotAllowed, NotFound
from llmgw.router.canary import Canaries, explain_lines
from llmgw.router.endpoints import Endpoint, EndpointRegistry

Answer = tuple[int, Any]


def replica_state(endpoint: Endpoint, now: float, wall_now: float) -> dict[str, Any]:
    """One endpoint as the admin API shows it; times as unix seconds."""
    breaker = endpoint.breaker
    last = endpoint.last_error
    return {
        "id": endpoint.id,
        "models": list(endpoint.spec.models),
        "engine": endpoint.spec.engine,
        "breaker": breaker.state(now),
        "consecutive_failures": breaker.consecutive_failures,
        "inflight": endpoint.inflight,
        "last_error": None if last is None else last[1],
        "last_error_at": None if last is None else wall_now - (now - last[0]),
    }


class RouterRoutes:
    """`/api/router/...` over one gateway's endpoint registry."""

    def __init__(
        self,
        endpoints: EndpointRegistry,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        canaries: Canaries | None = None,
    ) -> None:
        self._endpoints = endpoints
        self._canaries = canaries
        self._clock = clock
        self._wall_clock = wall_clock

    async def handle(self, method: str, parts: list[str], query: Mapping[str, str], body: bytes) -> Answer:
        del query, body
        if parts == ["replicas"]:
            if method != "GET":
                raise MethodNotAllowed("/api/router/replicas takes GET", allow="GET")
            now, wall_now = self._clock(), self._wall_clock()
            return 200, {"data": [replica_state(e, now, wall_now) for e in self._endpoints.all()]}
        if parts and parts[0] == "canaries" and self._canaries is not None:
            return self._canary(method, parts[1:], self._canaries)
        raise NotFound(
            f"/api/router/{'/'.join(parts)} is not a router route: use /api/router/replicas or "
            "/api/router/canaries",
            code="unknown_route",
        )

    def _canary(self, method: str, rest: list[str], canaries: Canaries) -> Answer:
        if not rest:
            if method != "GET":
                raise MethodNotAllowed("/api/router/canaries takes GET", allow="GET")
            return 200, {"data": [canaries.describe(name) for name in canaries.names()]}
        reset = rest[-1] == "reset" and len(rest) > 1
        name = "/".join(rest[:-1] if reset else rest)
        if reset and method != "POST":
            raise MethodNotAllowed(f"/api/router/canaries/{name}/reset takes POST", allow="POST")
        if not reset and method != "GET":
            raise MethodNotAllowed(f"/api/router/canaries/{name} takes GET (POST …/reset)", allow="GET")
        described = canaries.reset(name) if reset else canaries.describe(name)
        if described is None:
            known = ", ".join(canaries.names()) or "none"
            raise NotFound(
                f"model {name!r} has no canary in the catalog in force (models with one: {known}); "
                "give the model's own name, not an alias or its candidate",
                code="canary_not_found",
            )
        return 200, {**described, "lines": explain_lines(described)}
