"""`Principal`: who is calling, resolved from a key and the tenancy tree, with
everything the request path asks of it already worked out (limits, budgets, allowed
models, admission band), so each request costs dictionary lookups only."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from llmgw.auth.budgets import BudgetCheck, BudgetRule
from llmgw.auth.limiter import LimitRule, Meter

TENANT_LEVELS: tuple[str, ...] = ("org", "team", "project")
RowIdentity = tuple[str, str | None, str | None, str | None, str | None]
"""Key, user, project, team and org, as a usage record's columns hold them."""


@dataclass(frozen=True, slots=True)
class Principal:
    """The caller behind one API key."""

    key_id: str
    kind: Literal["project", "personal"]
    project_id: str | None
    team_id: str | None
    org_id: str | None
    user_id: str | None
    band: str | None
    """Admission band from the key, else its project (or person); None is the default band."""
    expires_at: float | None
    rpm: LimitRule | None
    tpm: LimitRule | None
    budgets: tuple[BudgetRule, ...]
    model_sets: tuple[frozenset[str], ...]
    """Each level's allowed models, for the levels that restrict them."""
    spend_scopes: tuple[str, ...]
    """The ledger scopes a request's cost is charged to (`spend_scopes_of`)."""
    cache_ttl_s: float = 0.0
    """How long the response cache keeps its project's answers; 0: not cached (a
    personal key's answers never are)."""
    row_identity: RowIdentity = field(init=False, compare=False)
    """The caller as its usage records name it: made once, since every answered request
    is recorded with it."""
    sees_every_model: bool = field(init=False, compare=False)
    """No level restricts the models (the usual case, asked on every request)."""
    meter: Meter = field(init=False, compare=False, repr=False)
    """Its limits' counters as admission last found them (the limiter's to change)."""
    budget_check: BudgetCheck = field(init=False, compare=False, repr=False)
    """Its budgets and the ledger's last verdict on them (the ledger's to change)."""

    def __post_init__(self) -> None:
        row = (self.key_id, self.user_id, self.project_id, self.team_id, self.org_id)
        object.__setattr__(self, "row_identity", row)
        object.__setattr__(self, "sees_every_model", not self.model_sets)
        object.__setattr__(self, "meter", Meter(self.rpm, self.tpm))
        object.__setattr__(self, "budget_check", BudgetCheck(self.budgets))

    def tenant(self, level: str) -> str | None:
        """The label value of per-tenant metrics at `level` (org, team or project);
        personal use is `personal`; None for the level `none`."""
        # Asked on every request, hence comparisons rather than a dictionary built per call.
        if level == "org":
            found = self.org_id
        elif level == "team":
            found = self.team_id
        elif level == "project":
            found = self.project_id
        else:
            return None
        return "personal" if self.kind == "personal" else found

    def owns(self, owner: str) -> bool:
        """Whether the caller is inside `owner` (org:ID, team:ID, project:ID, user:ID or key:ID)."""
        scope, _, ident = owner.partition(":")
        mine = {
            "org": self.org_id,
            "team": self.team_id,
            "project": self.project_id,
            "user": self.user_id,
            "key": self.key_id,
        }.get(scope)
        return mine is not None and mine == ident

    def allows(self, model: str) -> bool:
        if self.sees_every_model:
            return True
        return all(model in allowed for allowed in self.model_sets)


def spend_scopes_of(
    kind: str, user_id: str | None, project_id: str | None, team_id: str | None, org_id: str | None
) -> tuple[str, ...]:
    """A personal key's spend is its person's; a project key's, its project's, team's
    and organisation's."""
    if kind == "personal":
        return (f"user:{user_id}",)
    return (f"project:{project_id}", f"team:{team_id}", f"org:{org_id}")
