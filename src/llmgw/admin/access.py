"""A signed-in person's admin API request, checked against their roles before the
handlers run, and the lists it answers cut down to what they may see.

Each route names an action on a thing of the tenancy tree; `llmgw.identity.roles.decide`
says yes, 403 (`role_refused`: they see it, it is not theirs to do) or 404 (they may not
see it: the answer is the one a thing that does not exist gets). Routes that are no
person's (limits, budgets, key lifetimes, usage, guard, control, settings) answer 403
`operator_only`. A person may not set a scope's or a key's limits, band or lifetime
bound either: those are the operator's, and a person could otherwise raise their own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from llmgw.admin import models as m
from llmgw.errors import Forbidden, NotFound
from llmgw.identity.roles import Action, Actor, Kind, Target, Tree, Verdict, decide, may
from llmgw.store import Store
from llmgw.store.grants import role_kind

Query = Mapping[str, str]
_PLURAL: dict[str, Kind] = {"orgs": "org", "teams": "team", "projects": "project", "users": "user"}
_PARENT = {"team": "org", "project": "team"}
_CREATE: dict[str, type[m.Body]] = {"team": m.TeamBody, "project": m.ProjectBody}
_KEY_OPERATOR_FIELDS = ("band", "rpm", "tpm")
_VERBS: dict[Action, str] = {"view": "see", "manage": "change", "keys": "manage the keys of"}


def _operator_only(what: str) -> Forbidden:
    return Forbidden(
        f"{what} is the operator's: it needs the admin token, on admin_listen", code="operator_only"
    )


def enforce(verdict: Verdict, action: Action, target: Target) -> None:
    """Raises the refusal a verdict means; nothing when it allows."""
    if verdict is Verdict.HIDE:
        raise NotFound(f"{target.kind} {target.id!r} does not exist", code="not_found")
    if verdict is Verdict.FORBID:
        raise Forbidden(
            f"your roles do not let you {_VERBS[action]} {target.kind} {target.id!r}: "
            "ask an admin of its team or organisation",
            code="role_refused",
        )


class Access:
    """Checks and filters a person's admin API requests over the store's tenancy tree."""

    def __init__(self, store: Store) -> None:
        self._store = store

    async def tree(self, projects: Iterable[str] = (), teams: Iterable[str] = ()) -> Tree:
        """The ancestors of these projects and teams, read from the store."""
        tenancy = self._store.tenancy
        team_of = await tenancy.parents_of("project", projects)
        org_of = await tenancy.parents_of("team", {*teams, *team_of.values()})
        return Tree(team_of, org_of)

    async def allow(
        self, actor: Actor, action: Action, kind: Kind, ident: str, parent: str | None = None
    ) -> None:
        """Raises unless `actor` may do `action` to the thing."""
        tree = await self.tree(
            projects=[ident] if kind == "project" else [],
            teams=[ident] if kind == "team" else [parent] if kind == "project" and parent else [],
        )
        target = tree.target(kind, ident, parent)
        enforce(decide(actor, action, target), action, target)

    async def check(
        self, actor: Actor, method: str, parts: list[str], query: Query, body: dict[str, Any]
    ) -> None:
        """Raises the refusal for a request this person may not make."""
        head, rest = (parts[0], parts[1:]) if parts else ("", [])
        if head in _PLURAL:
            await self._scopes(actor, method, _PLURAL[head], rest, body)
        elif head == "memberships":
            await self._memberships(actor, method, rest, query, body)
        elif head == "keys":
            await self._keys(actor, method, rest, query, body)
        else:
            raise _operator_only(f"/api/{head}" if head else "the route list")

    async def _scopes(
        self, actor: Actor, method: str, kind: Kind, rest: list[str], body: dict[str, Any]
    ) -> None:
        if not rest:
            if method == "GET":
                return  # the answer is filtered
            if method != "POST" or kind not in _CREATE:
                raise _operator_only(f"making {kind}s")
            fields = _CREATE[kind].model_validate(body)
            settings = sorted(set(fields.model_fields_set) - {"id", _PARENT[kind]})
            if settings:
                raise _operator_only(f"setting {', '.join(settings)}")
            parent = str(getattr(fields, _PARENT[kind]))
            try:
                await self.allow(actor, "manage", kind, str(getattr(fields, "id")), parent)  # noqa: B009
            except NotFound:
                raise NotFound(f"{_PARENT[kind]} {parent!r} does not exist", code="not_found") from None
            return
        ident = rest[0]
        if kind == "user" and len(rest) == 4 and rest[1] == "roles":
            scope_kind = role_kind(rest[2])
            if scope_kind is None:  # the operator's answer too (Handlers._role)
                raise NotFound(
                    f"/api/users/{ident}/roles/{rest[2]}: roles are held in an org, team or project",
                    code="unknown_route",
                )
            await self.allow(actor, "manage", scope_kind, rest[3])
            return
        if method == "GET" and len(rest) == 1:
            await self.allow(actor, "view", kind, ident)
            return
        if method == "DELETE" and len(rest) == 1 and kind in ("team", "project"):
            await self.allow(actor, "manage", kind, ident)
            return
        # Changing settings, deleting orgs and people, deciding signups: shown as 404
        # where the thing is hidden, else as the operator's.
        await self.allow(actor, "view", kind, ident)
        raise _operator_only(f"{method} /api/{kind}s/{ident}{'/' + '/'.join(rest[1:]) if rest[1:] else ''}")

    async def _memberships(
        self, actor: Actor, method: str, rest: list[str], query: Query, body: dict[str, Any]
    ) -> None:
        if not rest and method == "GET":
            if query.get("project"):
                await self.allow(actor, "view", "project", query["project"])
            return
        if not rest and method == "POST":
            await self.allow(actor, "manage", "project", m.MembershipBody.model_validate(body).project)
            return
        if len(rest) == 2 and method == "DELETE":
            await self.allow(actor, "manage", "project", rest[1])
            return
        raise _operator_only(f"{method} /api/memberships")

    async def _keys(
        self, actor: Actor, method: str, rest: list[str], query: Query, body: dict[str, Any]
    ) -> None:
        if not rest and method == "GET":
            if query.get("project"):
                await self.allow(actor, "keys", "project", query["project"])
            if query.get("user"):
                await self.allow(actor, "keys", "user", query["user"])
            return
        if not rest and method == "POST":
            fields = m.KeyBody.model_validate(body)
            fixed = [name for name in _KEY_OPERATOR_FIELDS if name in fields.model_fields_set]
            if fixed:
                raise _operator_only(f"a key's {', '.join(fixed)}")
            if fields.project is not None:
                await self.allow(actor, "keys", "project", fields.project)
            if fields.user is not None:
                await self.allow(actor, "keys", "user", fields.user)
            return
        if rest and method in ("GET", "DELETE", "POST"):
            key = await self._store.keys.get(rest[0])
            if key.project_id is not None:
                await self.allow(actor, "keys", "project", key.project_id)
            else:
                await self.allow(actor, "keys", "user", key.user_id or "")
            return
        raise _operator_only(f"{method} /api/keys")

    async def key_projects(self, actor: Actor) -> list[str]:
        """The projects whose keys `actor` may make and revoke."""
        ids = [project.id for project in await self._store.tenancy.find("project")]
        tree = await self.tree(projects=ids)
        return [ident for ident in ids if may(actor, "keys", tree.target("project", ident))]

    async def visible(self, actor: Actor, parts: list[str], payload: Any) -> Any:
        """A list answer cut down to what `actor` may see (the keys: what they may manage)."""
        head = parts[0] if parts else ""
        if len(parts) != 1 or not isinstance(payload, dict) or "data" not in payload:
            return payload
        rows: list[dict[str, Any]] = payload["data"]
        if head == "users":
            kept = [row for row in rows if row.get("id") == actor.user_id]
        elif head in ("orgs", "teams", "projects"):
            kind = _PLURAL[head]
            ids = [str(row["id"]) for row in rows]
            tree = await self.tree(
                projects=ids if kind == "project" else [], teams=ids if kind == "team" else []
            )
            kept = [row for row in rows if may(actor, "view", tree.target(kind, str(row["id"])))]
        elif head == "memberships":
            tree = await self.tree(projects=[str(row["project"]) for row in rows])
            kept = [row for row in rows if may(actor, "view", tree.target("project", str(row["project"])))]
        elif head == "keys":
            tree = await self.tree(projects=[str(row["project"]) for row in rows if row.get("project")])
            kept = [
                row
                for row in rows
                if may(
                    actor,
                    "keys",
                    tree.target("project", row["project"])
                    if row.get("project")
                    else Target("user", str(row["user"])),
                )
            ]
        else:
            kept = rows
        return {**payload, "data": kept}
