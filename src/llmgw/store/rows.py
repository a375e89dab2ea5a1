"""What the store hands out and takes in: plain frozen records, one per row, so the
layers above never hold a database row or a session."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NamedTuple

ScopeKind = Literal["org", "team", "project", "user"]
SCOPE_KINDS: tuple[ScopeKind, ...] = ("org", "team", "project", "user")
# The field each kind names its parent by.
PARENT_FIELD: dict[ScopeKind, str | None] = {
    "org": None,
    "team": "org_id",
    "project": "team_id",
    "user": None,
}


@dataclass(frozen=True, slots=True)
class Scope:
    """An organisation, team, project or person, and what it sets for itself.

    None is "not written here" for every setting, so the next level up (or the
    server's default) decides. `allowed_models` None allows every model.
    """

    kind: ScopeKind
    id: str
    parent: str | None = None
    rpm: int | None = None
    tpm: int | None = None
    budget_micros: int | None = None
    budget_period: str | None = None
    allowed_models: tuple[str, ...] | None = None
    band: str | None = None
    max_key_ttl_s: float | None = None
    gpu_quota: int | None = None
    """Devices (whole cards or MIG instances) the models this org, team or project owns
    may hold together, its subtree's included; None: no quota. Never set on a person."""
    email: str | None = None
    disabled: bool = False
    created_at: float = 0.0
    updated_at: float = 0.0


@dataclass(frozen=True, slots=True)
class KeyRow:
    """An API key as stored: its hash, never the key itself."""

    id: str
    hash: str
    name: str = ""
    project_id: str | None = None
    user_id: str | None = None
    band: str | None = None
    rpm: int | None = None
    tpm: int | None = None
    created_at: float = 0.0
    expires_at: float | None = None
    revoked_at: float | None = None
    updated_at: float = 0.0

    def active(self, now: float) -> bool:
        return self.revoked_at is None and (self.expires_at is None or now < self.expires_at)


@dataclass(frozen=True, slots=True)
class Membership:
    user_id: str
    project_id: str
    role: str = "member"
    created_at: float = 0.0


class UsageRow(NamedTuple):
    """One request's usage record, its fields in the store's column order, so a batch
    goes to the driver as it is. A tuple: one is made per request, and a tuple of plain
    values is cheaper to build than an object and drops out of the garbage collector's
    sight while it waits in the buffer."""

    ts: float
    request_id: str
    key_id: str | None
    user_id: str | None
    project_id: str | None
    team_id: str | None
    org_id: str | None
    model: str
    replica: str
    status: int
    stream: bool
    prompt_tokens: int
    completion_tokens: int
    cost_micros: int
    queue_s: float
    ttft_s: float | None
    duration_s: float
    tags: str | None
    """The tags as a JSON object's text; None without any."""


@dataclass(frozen=True, slots=True)
class UsageTotal:
    """Sums over a group of requests, as `llmgw usage` shows them."""

    group: str
    requests: int
    errors: int
    prompt_tokens: int
    completion_tokens: int
    cost_micros: int
