"""What each admin API route does, over the store; `admin_api` routes to it.

Keys are made here: the plaintext is in the creation answer only. A key's lifetime is
bounded by `auth.max_key_ttl` and by the shortest bound its organisation, team or
project sets; asked for none, it gets that bound. Changes made here reach this
process's gate at once and the other gateways within `cache_ttl`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from llmgw.admin import models as m
from llmgw.auth import policy
from llmgw.auth.budgets import current_periods
from llmgw.auth.gate import AuthGate
from llmgw.auth.keys import new_key
from llmgw.config import Settings
from llmgw.core.durations import format_duration, parse_duration
from llmgw.errors import BadRequest, Forbidden, MethodNotAllowed, NotFound
from llmgw.store import KeyRow, Membership, Scope, ScopeKind, Store
from llmgw.store.grants import role_kind
from llmgw.store.rows import SCOPE_KINDS
from llmgw.store.usage import GROUPS

Query = Mapping[str, str]
Answer = tuple[int, Any]
_PLURAL: dict[str, ScopeKind] = {"orgs": "org", "teams": "team", "projects": "project", "users": "user"}
_CREATE_BODY: dict[ScopeKind, type[m.ScopeFields]] = {
    "org": m.OrgBody,
    "team": m.TeamBody,
    "project": m.ProjectBody,
    "user": m.UserBody,
}
_PATCH_BODY: dict[ScopeKind, type[m.ScopeFields]] = {"user": m.UserPatch, "team": m.TeamPatch}
_MAX_RECORDS = 1000


def _kind(text: str) -> ScopeKind:
    if text in SCOPE_KINDS:
        return text
    raise NotFound(f"{text!r} is not a scope: use org, team, project or user", code="unknown_route")


_NEWEST_MAX = 1000
"""The most keys one `GET /api/keys?newest=N` lists."""


class Handlers:
    """The admin API's operations."""

    def __init__(
        self, settings: Settings, store: Store, gate: AuthGate | None, clock: Callable[[], float]
    ) -> None:
        self._settings = settings
        self._auth = settings.auth
        self._bands = {band.name for band in settings.router.admission.bands}
        self._store = store
        self._gate = gate
        self._clock = clock

    async def dispatch(self, method: str, parts: list[str], query: Query, body: dict[str, Any]) -> Answer:
        if not parts:
            raise NotFound(
                "the admin API's routes are under /api: orgs, teams, projects, users, "
                "memberships, keys, limits, budgets, ttl, cache, usage",
                code="unknown_route",
            )
        head, rest = parts[0], parts[1:]
        if head in _PLURAL:
            return await self._scopes(method, _PLURAL[head], rest, query, body)
        route = {
            "memberships": self._memberships,
            "keys": self._keys,
            "limits": self._limits,
            "budgets": self._budgets,
            "ttl": self._ttl,
            "cache": self._cache,
            "usage": self._usage,
        }.get(head)
        if route is None:
            raise NotFound(f"/api/{head} is not an admin API route", code="unknown_route")
        return await route(method, rest, query, body)

    # --- orgs, teams, projects, users --------------------------------------------------

    def _check_band(self, band: str | None) -> None:
        if band is not None and band not in self._bands:
            raise BadRequest(
                f"band {band!r} is not one of router.admission.bands: {', '.join(sorted(self._bands))}"
            )

    async def _scopes(
        self, method: str, kind: ScopeKind, rest: list[str], query: Query, body: dict[str, Any]
    ) -> Answer:
        tenancy = self._store.tenancy
        if not rest:
            if method == "GET":
                parent = (
                    query.get("org") if kind == "team" else query.get("team") if kind == "project" else None
                )
                return 200, {"data": [m.scope_json(s) for s in await tenancy.find(kind, parent)]}
            if method == "POST":
                fields = _CREATE_BODY[kind].model_validate(body)
                self._check_band(fields.band)
                now = self._clock()
                parent = getattr(fields, "org", None) or getattr(fields, "team", None)
                changes = m.store_changes(fields, given=set(fields.model_fields_set))
                scope = Scope(
                    kind=kind,
                    id=getattr(fields, "id"),  # noqa: B009 - every create body has one
                    parent=parent,
                    email=getattr(fields, "email", None),
                    disabled=getattr(fields, "disabled", False),
                    created_at=now,
                    updated_at=now,
                    **{k: v for k, v in changes.items() if k not in ("email", "disabled")},
                )
                await tenancy.create(scope)
                if scope.idp_group is not None:
                    await self._store.provisioning.sync_team(scope.id, now)
                self._refresh_gate(scope)
                return 201, m.scope_json(scope)
            raise MethodNotAllowed(f"/api/{kind}s takes GET or POST")
        scope_id = rest[0]
        if kind == "user" and len(rest) == 4 and rest[1] == "roles":
            return await self._role(method, scope_id, rest[2], rest[3], body)
        if kind == "user" and len(rest) == 2:
            return await self._decide_signup(method, scope_id, rest[1])
        if kind == "team" and rest[1:] == ["members"] and method == "GET":
            found = await self._store.provisioning.team_members(scope_id)
            return 200, {"data": [m.team_member_json(x) for x in found]}
        if method == "GET":
            return 200, m.scope_json(await tenancy.get(kind, scope_id))
        if method == "PATCH":
            # A person owns no models, so has no GPU quota: its patch refuses the field.
            patch_type = _PATCH_BODY.get(kind, m.TenancyFields)
            patch = patch_type.model_validate(body)
            self._check_band(patch.band)
            now = self._clock()
            changes = m.store_changes(patch, given=set(patch.model_fields_set))
            scope = await tenancy.update(kind, scope_id, changes, now)
            if "idp_group" in changes:
                await self._store.provisioning.sync_team(scope_id, now)
            self._refresh_gate(scope)
            if kind == "user" and scope.disabled:
                # Disabling a person signs them out everywhere: their sessions are refused
                # by every gateway once its cached answer is auth.cache_ttl old.
                await self._store.sessions.end_for_user(scope_id)
            return 200, m.scope_json(scope)
        if method == "DELETE":
            await tenancy.delete(kind, scope_id)
            return 200, {"deleted": f"{kind}:{scope_id}"}
        raise MethodNotAllowed(f"/api/{kind}s/{scope_id} takes GET, PATCH or DELETE")

    async def _decide_signup(self, method: str, user_id: str, decision: str) -> Answer:
        """POST /api/users/<id>/approve or /reject: a pending person let in or turned away
        (a rejected person's sessions end, and their sign-ins are refused)."""
        status = {"approve": "active", "reject": "rejected"}.get(decision)
        if status is None:
            raise NotFound(f"/api/users/{user_id}/{decision}: use approve or reject", code="unknown_route")
        if method != "POST":
            raise MethodNotAllowed(f"/api/users/{user_id}/{decision} takes POST", allow="POST")
        person = await self._store.people.set_status(user_id, status, self._clock())
        if status == "rejected":
            await self._store.sessions.end_for_user(user_id)
        return 200, {"id": person.id, "email": person.email, "name": person.name, "status": person.status}

    async def _role(
        self, method: str, user_id: str, text: str, scope_id: str, body: dict[str, Any]
    ) -> Answer:
        """PUT or DELETE /api/users/<id>/roles/<org|team|project>/<id>: a role granted
        (or changed) and revoked; sessions see it within auth.cache_ttl."""
        kind = role_kind(text)
        if kind is None:
            raise NotFound(
                f"/api/users/{user_id}/roles/{text}: roles are held in an org, team or project",
                code="unknown_route",
            )
        if method == "PUT":
            role = m.RoleBody.model_validate(body).role
            await self._store.grants.grant(user_id, kind, scope_id, role, self._clock())
            return 200, {"user": user_id, "kind": kind, "id": scope_id, "role": role}
        if method == "DELETE":
            await self._store.grants.revoke(user_id, kind, scope_id)
            return 200, {"revoked": f"{user_id} in {kind} {scope_id}"}
        raise MethodNotAllowed(f"/api/users/{user_id}/roles/{kind}/{scope_id} takes PUT or DELETE")

    def _refresh_gate(self, scope: Scope) -> None:
        if self._gate is not None:
            self._gate.directory.apply((scope,), (), self._clock())

    async def _memberships(self, method: str, rest: list[str], query: Query, body: dict[str, Any]) -> Answer:
        tenancy = self._store.tenancy
        if not rest and method == "GET":
            found = await tenancy.members(project_id=query.get("project"), user_id=query.get("user"))
            return 200, {"data": [m.membership_json(x) for x in found]}
        if not rest and method == "POST":
            fields = m.MembershipBody.model_validate(body)
            member = Membership(fields.user, fields.project, fields.role, self._clock())
            return 201, m.membership_json(await tenancy.add_member(member))
        if len(rest) == 2 and method == "DELETE":
            await tenancy.remove_member(rest[0], rest[1])
            return 200, {"deleted": f"{rest[0]} in {rest[1]}"}
        raise MethodNotAllowed(
            "memberships: GET or POST /api/memberships, DELETE /api/memberships/<user>/<project>"
        )

    # --- keys --------------------------------------------------------------------------

    async def _keys(self, method: str, rest: list[str], query: Query, body: dict[str, Any]) -> Answer:
        keys = self._store.keys
        now = self._clock()
        if not rest and method == "GET" and "newest" in query:
            # A page of a large store (the dashboard's): the newest N and the count.
            limit = query["newest"]
            if not limit.isdigit() or not 1 <= int(limit) <= _NEWEST_MAX:
                raise BadRequest(f"newest must be a whole number from 1 to {_NEWEST_MAX}", param="newest")
            page, total = await keys.newest(int(limit), include_revoked=query.get("all") == "1")
            return 200, {"data": [m.key_json(k, now) for k in page], "total": total}
        if not rest and method == "GET":
            found = await keys.find(
                project_id=query.get("project"),
                user_id=query.get("user"),
                include_revoked=query.get("all") == "1",
            )
            return 200, {"data": [m.key_json(k, now) for k in found]}
        if not rest and method == "POST":
            return 201, await self._create_key(m.KeyBody.model_validate(body), now)
        if len(rest) == 1 and method == "GET":
            return 200, m.key_json(await keys.get(rest[0]), now)
        if (len(rest) == 1 and method == "DELETE") or (rest[1:] == ["revoke"] and method == "POST"):
            revoked = await keys.revoke(rest[0], now)
            if self._gate is not None:
                self._gate.key_changed(revoked)
            return 200, m.key_json(revoked, now)
        raise MethodNotAllowed("keys: GET or POST /api/keys, GET or DELETE /api/keys/<id>")

    async def _levels_of(self, key: m.KeyBody) -> list[Scope]:
        tenancy = self._store.tenancy
        if key.project is not None:
            project = await tenancy.get("project", key.project)
            team = await tenancy.get("team", project.parent or "")
            return [project, team, await tenancy.get("org", team.parent or "")]
        return [await tenancy.get("user", key.user or "")]

    async def _create_key(self, fields: m.KeyBody, now: float) -> dict[str, Any]:
        if (fields.project is None) == (fields.user is None):
            raise BadRequest(
                "a key belongs to a project or to a person: give exactly one of project and user"
            )
        if fields.user is not None and self._auth.personal.disabled:
            raise Forbidden("personal keys are off here (auth.personal.disabled): make a project key")
        self._check_band(fields.band)
        levels = await self._levels_of(fields)
        bound = policy.max_key_ttl(levels if fields.project else [], self._auth)
        ttl = fields.ttl or bound
        if bound is not None and ttl is not None and ttl > bound:
            raise BadRequest(
                f"ttl {format_duration(ttl)} is longer than this key may live ({format_duration(bound)}, "
                "from auth.max_key_ttl or its organisation, team or project): ask for less"
            )
        made = new_key()
        row = KeyRow(
            id=made.id,
            hash=made.hash,
            name=fields.name,
            project_id=fields.project,
            user_id=fields.user,
            band=fields.band,
            rpm=fields.rpm,
            tpm=fields.tpm,
            created_at=now,
            expires_at=None if ttl is None else now + ttl.total_seconds(),
            updated_at=now,
        )
        await self._store.keys.create(row)
        if self._gate is not None:
            self._gate.key_changed(row)
        return {**m.key_json(row, now), "key": made.plaintext}

    # --- limits, budgets, key lifetimes ------------------------------------------------

    async def _limits(self, method: str, rest: list[str], query: Query, body: dict[str, Any]) -> Answer:
        if not rest and method == "GET":
            rows: list[dict[str, Any]] = []
            for kind in SCOPE_KINDS:
                for s in await self._store.tenancy.find(kind):
                    if s.rpm is not None or s.tpm is not None:
                        rows.append({"scope": f"{kind}:{s.id}", "rpm": s.rpm, "tpm": s.tpm})
            for k in await self._store.keys.find():
                if k.rpm is not None or k.tpm is not None:
                    rows.append({"scope": f"key:{k.id}", "rpm": k.rpm, "tpm": k.tpm})
            defaults = {"rpm": self._auth.default_rpm or None, "tpm": self._auth.default_tpm or None}
            return 200, {"data": rows, "defaults": defaults}
        if len(rest) == 2 and method == "PUT":
            fields = m.LimitsBody.model_validate(body)
            changes = {name: getattr(fields, name) for name in fields.model_fields_set}
            if rest[0] == "key":
                raise BadRequest("a key's limits are set when it is made; make a new key to change them")
            scope = await self._store.tenancy.update(_kind(rest[0]), rest[1], changes, self._clock())
            self._refresh_gate(scope)
            return 200, m.scope_json(scope)
        raise MethodNotAllowed("limits: GET /api/limits, PUT /api/limits/<kind>/<id>")

    async def _budgets(self, method: str, rest: list[str], query: Query, body: dict[str, Any]) -> Answer:
        if not rest and method == "GET":
            now = self._clock()
            spend = await self._store.usage.spend_totals(current_periods(now))
            starts = current_periods(now)
            rows = []
            for kind in SCOPE_KINDS:
                for s in await self._store.tenancy.find(kind):
                    if s.budget_micros is None:
                        continue
                    period = s.budget_period or "month"
                    spent = spend.get((f"{kind}:{s.id}", period, starts[period]), 0)
                    rows.append(
                        {
                            "scope": f"{kind}:{s.id}",
                            "budget": m.units(s.budget_micros),
                            "period": period,
                            "spent": m.units(spent),
                        }
                    )
            return 200, {"data": rows}
        if len(rest) == 2 and method == "PUT":
            fields = m.BudgetBody.model_validate(body)
            changes: dict[str, Any] = {}
            if "budget" in fields.model_fields_set:
                changes["budget_micros"] = m.micros(fields.budget)
            if "period" in fields.model_fields_set:
                changes["budget_period"] = fields.period
            scope = await self._store.tenancy.update(_kind(rest[0]), rest[1], changes, self._clock())
            self._refresh_gate(scope)
            return 200, m.scope_json(scope)
        raise MethodNotAllowed("budgets: GET /api/budgets, PUT /api/budgets/<kind>/<id>")

    async def _ttl(self, method: str, rest: list[str], query: Query, body: dict[str, Any]) -> Answer:
        if len(rest) == 2 and method == "PUT":
            kind = _kind(rest[0])
            if kind == "user":
                raise BadRequest(
                    "key lifetimes are bounded per org, team or project; for people, auth.max_key_ttl"
                )
            fields = m.TtlBody.model_validate(body)
            seconds = None if fields.max_key_ttl is None else fields.max_key_ttl.total_seconds()
            scope = await self._store.tenancy.update(kind, rest[1], {"max_key_ttl_s": seconds}, self._clock())
            self._refresh_gate(scope)
            return 200, m.scope_json(scope)
        raise MethodNotAllowed("ttl: PUT /api/ttl/<org|team|project>/<id> {max_key_ttl}")

    async def _cache(self, method: str, rest: list[str], query: Query, body: dict[str, Any]) -> Answer:
        if len(rest) == 2 and method == "PUT":
            if rest[0] != "project":
                raise BadRequest("the response cache is switched on per project: /api/cache/project/<id>")
            fields = m.CacheBody.model_validate(body)
            ttl = fields.ttl
            seconds = None if ttl is None or not ttl.total_seconds() else ttl.total_seconds()
            changes = {"cache_ttl_s": seconds}
            scope = await self._store.tenancy.update("project", rest[1], changes, self._clock())
            self._refresh_gate(scope)
            return 200, m.scope_json(scope)
        raise MethodNotAllowed("cache: PUT /api/cache/project/<id> {ttl}")

    # --- usage -------------------------------------------------------------------------

    async def _usage(self, method: str, rest: list[str], query: Query, body: dict[str, Any]) -> Answer:
        if method != "GET":
            raise MethodNotAllowed("usage: GET /api/usage, GET /api/usage/records")
        now = self._clock()
        since = now - _duration(query.get("since", "24h")).total_seconds()
        if rest == ["records"]:
            given = query.get("limit", "")
            # Digits only, and few enough that int() takes them (it refuses over 4300).
            limit = min(int(given) if given.isdigit() and len(given) <= 9 else 100, _MAX_RECORDS)
            return 200, {
                "data": await self._store.usage.records(limit=limit, since=since, key_id=query.get("key"))
            }
        if rest:
            raise NotFound("usage: /api/usage or /api/usage/records", code="unknown_route")
        by = query.get("by", "project")
        if by not in GROUPS:
            raise BadRequest(f"by={by!r}: group usage by one of {', '.join(GROUPS)}", param="by")
        totals = await self._store.usage.totals(by, since)
        return 200, {
            "by": by,
            "since": since,
            "data": [
                {
                    by: t.group,
                    "requests": t.requests,
                    "errors": t.errors,
                    "prompt_tokens": t.prompt_tokens,
                    "completion_tokens": t.completion_tokens,
                    "cost": m.units(t.cost_micros),
                }
                for t in totals
            ],
        }


def _duration(text: str) -> timedelta:
    try:
        value = parse_duration(text)
    except ValueError as exc:
        raise BadRequest(f"since: {exc}", param="since") from None
    if value <= timedelta(0):
        raise BadRequest("since: give a positive duration, like 24h", param="since")
    return value
