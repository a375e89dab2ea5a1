"""The admin API's request bodies (validated, unknown fields refused) and how stored
rows are written back as JSON.

Budgets travel in whole units (`12.5`), the store keeps millionths; durations travel
as text (`720h`). In a PATCH, a field sent as null clears that setting back to
inherited, and a field left out is left alone.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from llmgw.config.auth import MICROS_PER_UNIT, Budget
from llmgw.config.values import PositiveDuration as Duration
from llmgw.core.durations import format_duration
from llmgw.store.provisioning import TeamMember
from llmgw.store.rows import KeyRow, Membership, Scope

Ident = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$")]
MAX_LIMIT = 10**12
"""The largest rate limit or quota taken: more than any real one, and well within what
the store's integer columns hold."""
Limit = Annotated[int, Field(ge=0, le=MAX_LIMIT)]
GroupName = Annotated[str, StringConstraints(min_length=1, max_length=256, strip_whitespace=True)]


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ScopeFields(Body):
    """What any level sets for itself; None inherits (in a PATCH, clears)."""

    rpm: Limit | None = None
    tpm: Limit | None = None
    budget: Budget | None = None
    budget_period: Literal["day", "month"] | None = None
    allowed_models: list[str] | None = None
    band: str | None = None
    max_key_ttl: Duration | None = None


class TenancyFields(ScopeFields):
    """What an org, team or project sets beyond a person's: the devices (whole cards or
    MIG instances) the models it owns may hold together, its subtree's included."""

    gpu_quota: Limit | None = None


class OrgBody(TenancyFields):
    id: Ident


class TeamBody(TenancyFields):
    id: Ident
    org: Ident
    idp_group: GroupName | None = None
    """The identity provider's group whose members are this team's (SCIM, sign-in)."""


class TeamPatch(TenancyFields):
    """A team's own: the identity provider group whose members join it (the OIDC groups
    claim at sign-in, SCIM group pushes); None clears it."""

    idp_group: GroupName | None = None


class ProjectBody(TenancyFields):
    id: Ident
    team: Ident


class UserBody(ScopeFields):
    id: Ident
    email: str | None = None
    disabled: bool = False


class UserPatch(ScopeFields):
    email: str | None = None
    disabled: bool | None = None


class MembershipBody(Body):
    user: Ident
    project: Ident
    role: Literal["member", "admin"] = "member"


class RoleBody(Body):
    """PUT /api/users/<id>/roles/<kind>/<id>: the role granted there."""

    role: Literal["member", "admin"]


class KeyBody(Body):
    project: Ident | None = None
    user: Ident | None = None
    name: str = ""
    ttl: Duration | None = None
    band: str | None = None
    rpm: Limit | None = None
    tpm: Limit | None = None


class LimitsBody(Body):
    rpm: Limit | None = None
    tpm: Limit | None = None


class BudgetBody(Body):
    budget: Budget | None = None
    period: Literal["day", "month"] | None = None


class TtlBody(Body):
    max_key_ttl: Duration | None = None


class CacheBody(Body):
    """PUT /api/cache/project/<id>: how long the response cache keeps the project's
    answers; null turns it off."""

    ttl: Duration | None = None


def micros(units: float | None) -> int | None:
    return None if units is None else round(units * MICROS_PER_UNIT)


def units(value: int | None) -> float | None:
    return None if value is None else value / MICROS_PER_UNIT


def store_changes(fields: ScopeFields, *, given: set[str]) -> dict[str, Any]:
    """The store columns for the fields a request gave."""
    changes: dict[str, Any] = {}
    for name in given:
        value = getattr(fields, name)
        if name == "budget":
            changes["budget_micros"] = micros(value)
        elif name == "max_key_ttl":
            changes["max_key_ttl_s"] = None if value is None else value.total_seconds()
        elif name == "allowed_models":
            changes[name] = None if value is None else tuple(value)
        elif name in ("rpm", "tpm", "budget_period", "band", "gpu_quota", "email", "disabled", "idp_group"):
            changes[name] = value
    return changes


def _ttl_text(seconds: float | None) -> str | None:
    return None if seconds is None else format_duration(timedelta(seconds=seconds))


def scope_json(scope: Scope) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": scope.kind, "id": scope.id}
    if scope.kind == "team":
        out["org"] = scope.parent
        out["idp_group"] = scope.idp_group
    elif scope.kind == "project":
        out["team"] = scope.parent
    out.update(
        rpm=scope.rpm,
        tpm=scope.tpm,
        budget=units(scope.budget_micros),
        budget_period=scope.budget_period,
        allowed_models=list(scope.allowed_models) if scope.allowed_models is not None else None,
        band=scope.band,
        created_at=scope.created_at,
        updated_at=scope.updated_at,
    )
    if scope.kind == "user":
        out.update(email=scope.email, disabled=scope.disabled, status=scope.status)
    else:
        out["max_key_ttl"] = _ttl_text(scope.max_key_ttl_s)
        out["gpu_quota"] = scope.gpu_quota
    if scope.kind == "project":
        out["cache_ttl"] = _ttl_text(scope.cache_ttl_s)
    return out


def key_json(key: KeyRow, now: float) -> dict[str, Any]:
    state = "revoked" if key.revoked_at is not None else ("expired" if not key.active(now) else "active")
    return {
        "id": key.id,
        "name": key.name,
        "project": key.project_id,
        "user": key.user_id,
        "band": key.band,
        "rpm": key.rpm,
        "tpm": key.tpm,
        "created_at": key.created_at,
        "expires_at": key.expires_at,
        "revoked_at": key.revoked_at,
        "state": state,
    }


def membership_json(member: Membership) -> dict[str, Any]:
    return {"user": member.user_id, "project": member.project_id, "role": member.role}


def team_member_json(member: TeamMember) -> dict[str, Any]:
    return {"user": member.user_id, "team": member.team_id, "role": member.role, "source": member.source}
