"""What the store hands out and takes in: plain frozen records, one per row, so the
layers above never hold a database row or a session."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal, NamedTuple

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
    cache_ttl_s: float | None = None
    """A project's: how long the response cache keeps its answers; None: not cached."""
    email: str | None = None
    disabled: bool = False
    created_at: float = 0.0
    updated_at: float = 0.0
    status: str = "active"
    """A person's: active, pending (a signup waiting for approval), rejected, or
    deprovisioned (deleted by the identity provider)."""
    idp_group: str | None = None
    """A team's identity-provider group: its members are the team's members too, by
    sign-in's groups claim (llmgw.store.people) and by SCIM (llmgw.store.provisioning).
    Never set on another level."""


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


RecordKey = tuple[str | None, str | None, str | None, str | None, str | None, str, int, bool]
"""What the usage records of one caller, model, status and streaming share, in the
columns' order: key, user, project, team and org ids, model, status, stream."""
RecordValues = tuple[float, str, str, int, int, int, float, float | None, float, Mapping[str, str] | None]
"""The rest of one request's record, in `RECORD_FIELDS`' order: ts, request id,
replica, prompt and completion tokens, cost in micro-units, seconds queued, to the first
byte (None when not streamed) and in all, and its tags (None without any). A plain
tuple: one is made per answered request, and a tuple of plain values is the cheapest
thing to build that drops out of the garbage collector's sight while it waits in the
buffer."""
Records = dict[RecordKey, list[RecordValues]]
"""Usage records as they are written: grouped by what they share, which is bound once
per statement rather than once per record."""


class UsageRow(NamedTuple):
    """One whole usage record (a `RecordKey` followed by its `RecordValues`), for what
    reads or makes records one at a time rather than as the request path batches them."""

    key_id: str | None
    user_id: str | None
    project_id: str | None
    team_id: str | None
    org_id: str | None
    model: str
    status: int
    stream: bool
    ts: float
    request_id: str
    replica: str
    prompt_tokens: int
    completion_tokens: int
    cost_micros: int
    queue_s: float
    ttft_s: float | None
    duration_s: float
    tags: Mapping[str, str] | None
    """None without any."""


RECORD_KEY_SIZE: Final = 8
"""How many of `UsageRow`'s fields make its `RecordKey`."""
RECORD_FIELDS: tuple[str, ...] = UsageRow._fields[RECORD_KEY_SIZE:]
"""The names of a `RecordValues`' fields, as a stored batch's JSON array holds them."""


@dataclass(frozen=True, slots=True)
class UsageTotal:
    """Sums over a group of requests, as `llmgw usage` shows them."""

    group: str
    requests: int
    errors: int
    prompt_tokens: int
    completion_tokens: int
    cost_micros: int
