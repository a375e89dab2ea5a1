"""What a person may do in the admin API, decided from their roles and where the thing
sits in the tenancy tree (project → team → org). Pure: data in, a verdict out, so each
rule is one row of a table test and the admin API only asks.

The rules:

- the operator (the admin token) may do everything;
- an org admin manages everything in their org: its teams, their projects, the
  projects' memberships and keys, and the roles within the org;
- a team admin manages that team's projects (making and deleting them), their
  memberships and their keys; a project admin manages that project's keys;
- anyone holding a role in a project, or in its team, sees that project; a role in a
  team or org lets one see that team or org;
- a person sees themselves and manages their own personal keys; only the operator
  manages people, limits, budgets, quotas and the control plane.

A verdict is `ALLOW`, `FORBID` (403: the person may see the thing, not do this to it)
or `HIDE` (404: they may not see it at all, so the answer must not tell whether it
exists; it reads like the answer for a thing that is not there).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from llmgw.store.people import Role

Action = Literal["view", "manage", "keys"]
"""view: see it; manage: change, make or delete it, its memberships and roles;
keys: list, make and revoke the keys that belong to it."""
Kind = Literal["org", "team", "project", "user"]


class Verdict(enum.Enum):
    ALLOW = "allow"
    FORBID = "forbid"
    """403: visible, but this action is not theirs."""
    HIDE = "hide"
    """404: not visible at all."""


@dataclass(frozen=True, slots=True)
class Target:
    """A thing in the tenancy tree, with its ancestors: a project's team and org, a
    team's org. A person (kind user) has none."""

    kind: Kind
    id: str
    team: str | None = None
    org: str | None = None


@dataclass(frozen=True, slots=True)
class Actor:
    """Who asks: the operator (no user id) or a signed-in person with their roles."""

    user_id: str | None
    roles: tuple[Role, ...] = ()

    @property
    def operator(self) -> bool:
        return self.user_id is None


OPERATOR = Actor(None)


@dataclass(frozen=True, slots=True)
class Tree:
    """The part of the tenancy tree a decision needs: each project's team, each team's
    org."""

    team_of: Mapping[str, str] = field(default_factory=dict)
    org_of: Mapping[str, str] = field(default_factory=dict)

    def target(self, kind: Kind, ident: str, parent: str | None = None) -> Target:
        """`ident` placed in the tree; `parent` places one not stored yet (being made)."""
        if kind == "project":
            team = parent or self.team_of.get(ident)
            return Target(kind, ident, team=team, org=self.org_of.get(team or ""))
        if kind == "team":
            return Target(kind, ident, org=parent or self.org_of.get(ident))
        return Target(kind, ident)


def decide(actor: Actor, action: Action, target: Target) -> Verdict:
    """Whether `actor` may do `action` to `target`."""
    if actor.operator:
        return Verdict.ALLOW
    if not may(actor, "view", target):
        return Verdict.HIDE
    return Verdict.ALLOW if may(actor, action, target) else Verdict.FORBID


def may(actor: Actor, action: Action, target: Target) -> bool:
    """The rule table itself, without the visibility answer `decide` adds."""
    if actor.operator:
        return True
    held = _held(actor.roles)

    def has(kind: str, ident: str | None, *roles: str) -> bool:
        role = held.get((kind, ident or ""))
        return role is not None and (not roles or role in roles)

    if target.kind == "user":
        # People are the operator's to manage; a person sees and keys only themselves.
        return action != "manage" and target.id == actor.user_id
    org_admin = has("org", target.org if target.kind != "org" else target.id, "admin")
    if target.kind == "org":
        return org_admin or (action == "view" and has("org", target.id))
    if target.kind == "team":
        if action == "view":
            return org_admin or has("team", target.id)
        if action == "keys":
            return org_admin or has("team", target.id, "admin")
        return org_admin
    # A project.
    team_admin = has("team", target.team, "admin")
    if action == "view":
        return org_admin or has("team", target.team) or has("project", target.id)
    if action == "keys":
        return org_admin or team_admin or has("project", target.id, "admin")
    return org_admin or team_admin


def _held(roles: Iterable[Role]) -> dict[tuple[str, str], str]:
    """Each scope's role; admin wins where a person holds two (a sign-in member and an
    operator's admin grant cannot both be stored, but a caller may pass both)."""
    held: dict[tuple[str, str], str] = {}
    for role in roles:
        key = (role.kind, role.id)
        if held.get(key) != "admin":
            held[key] = role.role
    return held
