"""Guard policies attached to parts of the tenancy tree: the admin API's routes over
the store, and the loop that brings every gateway's copy up to date.

    GET    /api/guard/attachments                       every attachment
    POST   /api/guard/attachments {policy, scope, id}   attach (201; 200 if it was)
    DELETE /api/guard/attachments/SCOPE/ID/POLICY       detach
    GET    /api/guard/policies                          the library and the default

A change made here applies in this process at once and in every other gateway of the
store within `guard_refresh_s` (half of `auth.cache_ttl`, as keys' changes do).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from llmgw.config.guard import Guard
from llmgw.errors import BadRequest, MethodNotAllowed, NotFound, StoreError
from llmgw.guard.engine import Guardrails
from llmgw.guard.policy import SCOPE_KINDS
from llmgw.store import SCOPE_KINDS as STORE_KINDS
from llmgw.store import ScopeKind, Store
from llmgw.store.guard import Attachment

log = logging.getLogger(__name__)

Answer = tuple[int, Any]


def as_table(rows: list[Attachment]) -> dict[tuple[str, str], tuple[str, ...]]:
    table: dict[tuple[str, str], list[str]] = {}
    for kind, scope_id, policy in rows:
        table.setdefault((kind, scope_id), []).append(policy)
    return {scope: tuple(policies) for scope, policies in table.items()}


class GuardRoutes:
    """`/api/guard/…` and the refresh of this gateway's attachments."""

    def __init__(
        self, settings: Guard, guard: Guardrails, store: Store, clock: Callable[[], float] = time.time
    ) -> None:
        self._settings = settings
        self._guard = guard
        self._store = store
        self._clock = clock

    async def refresh(self) -> None:
        """Reads every attachment and hands them to the guard as one new table."""
        self._guard.policies.replace_attachments(as_table(await self._store.guard.all()))

    async def run(self, interval_s: float) -> None:
        """Refreshes every `interval_s`; a store that cannot be reached keeps the last
        table (logged), never the request path waiting."""
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self.refresh()
            except StoreError as exc:
                log.warning("guard attachments not refreshed: %s", exc)

    async def handle(
        self, method: str, parts: list[str], query: Mapping[str, str], body: dict[str, Any]
    ) -> Answer:
        if parts == ["policies"] and method == "GET":
            return 200, {
                "default": self._settings.default,
                "data": [
                    {"name": p.name, "description": p.description, "checks": [c.type for c in p.checks]}
                    for p in self._settings.policies
                ],
            }
        if not parts or parts[0] != "attachments":
            raise NotFound(
                "the guard routes are /api/guard/attachments and /api/guard/policies", code="unknown_route"
            )
        rest = parts[1:]
        if not rest and method == "GET":
            rows = await self._store.guard.all()
            return 200, {"data": [{"scope": k, "id": i, "policy": p} for k, i, p in rows]}
        if not rest and method == "POST":
            kind, scope_id, policy = self._attachment(body)
            await self._store.tenancy.get(kind, scope_id)  # StoreMissing: 404 naming it
            created = await self._store.guard.attach(kind, scope_id, policy, self._clock())
            await self.refresh()
            return (201 if created else 200), {"scope": kind, "id": scope_id, "policy": policy}
        if len(rest) == 3 and method == "DELETE":
            level, scope_id, policy = rest
            if not await self._store.guard.detach(level, scope_id, policy):
                raise NotFound(f"policy {policy!r} is not attached to {level} {scope_id!r}", code="not_found")
            await self.refresh()
            return 200, {"detached": True}
        raise MethodNotAllowed(
            "guard: GET or POST /api/guard/attachments, DELETE /api/guard/attachments/SCOPE/ID/POLICY"
        )

    def _attachment(self, body: dict[str, Any]) -> tuple[ScopeKind, str, str]:
        scope_id, policy = body.get("id"), body.get("policy")
        kind = next((k for k in STORE_KINDS if k == body.get("scope")), None)
        if kind is None:
            raise BadRequest(f"scope must be one of {', '.join(SCOPE_KINDS)}", param="scope")
        if not isinstance(scope_id, str) or not scope_id:
            raise BadRequest("id must name the org, team, project or user", param="id")
        if not isinstance(policy, str) or self._settings.policy(policy) is None:
            known = ", ".join(p.name for p in self._settings.policies) or "none are defined"
            raise BadRequest(f"policy {policy!r} is not one of guard.policies ({known})", param="policy")
        return kind, scope_id, policy
