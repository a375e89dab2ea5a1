"""Working out a key's limits, budgets, allowed models, band and key lifetime from the
tenancy tree and the settings: pure functions, data in and data out.

Limits (RPM, TPM): the most specific limit written wins, larger or smaller than the
ones above it, and is counted where it is written: a key's own limit on that key, a
project's on all the project's keys together, and so on up to the organisation. For a
personal key the chain is the key, then the person, then `auth.personal` (a pool per
person). Where nothing is written, `default_rpm`/`default_tpm` apply per key. A
stored 0 is an explicit "no limit" that stops the search; NULL is "not written here".

Budgets: every budget written on the way up applies (a project's, its team's and its
organisation's), each to its own spend, so an organisation's budget caps the whole
organisation. A person's own budget replaces `auth.personal.budget`. A scope with no
budget refuses nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Literal

from llmgw.auth.budgets import BudgetRule
from llmgw.auth.limiter import LimitRule
from llmgw.auth.principal import Principal, spend_scopes_of
from llmgw.config.auth import Auth
from llmgw.store.rows import KeyRow, Scope, ScopeKind

Scopes = Mapping[ScopeKind, Mapping[str, Scope]]
DEFAULT_BUDGET_PERIOD = "month"


Candidate = tuple[int | None, str, str]
"""A limit as written (None: not written), its counter scope, and where it is written."""


def _first_limit(
    candidates: list[tuple[int | None, str, str]], default: int, key_id: str
) -> LimitRule | None:
    for value, scope, source in candidates:
        if value is None:
            continue
        return LimitRule(scope, value, source) if value > 0 else None
    return LimitRule(f"key:{key_id}", default, "default") if default > 0 else None


def chain(key: KeyRow, scopes: Scopes) -> list[Scope] | None:
    """The scopes above a key, most specific first; None when one is missing (deleted
    under the cache) or the person is disabled."""
    if key.project_id is not None:
        project = scopes["project"].get(key.project_id)
        team = scopes["team"].get(project.parent or "") if project else None
        org = scopes["org"].get(team.parent or "") if team else None
        if project is None or team is None or org is None:
            return None
        return [project, team, org]
    user = scopes["user"].get(key.user_id or "")
    if user is None or user.disabled:
        return None
    return [user]


def resolve(key: KeyRow, scopes: Scopes, auth: Auth) -> Principal | None:
    """The principal of an active key, or None when it cannot be used."""
    levels = chain(key, scopes)
    if levels is None:
        return None
    personal = key.project_id is None
    if personal and auth.personal.disabled:
        return None
    rpm_chain: list[Candidate] = [(key.rpm, f"key:{key.id}", "key")]
    tpm_chain: list[Candidate] = [(key.tpm, f"key:{key.id}", "key")]
    for level in levels:
        rpm_chain.append((level.rpm, f"{level.kind}:{level.id}", level.kind))
        tpm_chain.append((level.tpm, f"{level.kind}:{level.id}", level.kind))
    budgets: list[BudgetRule] = []
    if personal:
        user = levels[0]
        rpm_chain.append((auth.personal.rpm or None, f"user:{user.id}", "personal"))
        tpm_chain.append((auth.personal.tpm or None, f"user:{user.id}", "personal"))
        if user.budget_micros is not None:
            if user.budget_micros > 0:
                budgets.append(
                    BudgetRule(
                        f"user:{user.id}",
                        user.budget_micros,
                        user.budget_period or DEFAULT_BUDGET_PERIOD,
                        "user",
                    )
                )
        elif auth.personal.budget_micros is not None:
            budgets.append(
                BudgetRule(
                    f"user:{user.id}", auth.personal.budget_micros, auth.personal.effective_period, "personal"
                )
            )
    else:
        for level in levels:
            if level.budget_micros:
                budgets.append(
                    BudgetRule(
                        f"{level.kind}:{level.id}",
                        level.budget_micros,
                        level.budget_period or DEFAULT_BUDGET_PERIOD,
                        level.kind,
                    )
                )
    kind: Literal["project", "personal"] = "personal" if personal else "project"
    team_id = None if personal else levels[1].id
    org_id = None if personal else levels[2].id
    return Principal(
        key_id=key.id,
        kind=kind,
        project_id=key.project_id,
        team_id=team_id,
        org_id=org_id,
        user_id=key.user_id,
        band=key.band or levels[0].band,
        expires_at=key.expires_at,
        rpm=_first_limit(rpm_chain, auth.default_rpm, key.id),
        tpm=_first_limit(tpm_chain, auth.default_tpm, key.id),
        budgets=tuple(budgets),
        model_sets=tuple(frozenset(lv.allowed_models) for lv in levels if lv.allowed_models is not None),
        spend_scopes=spend_scopes_of(kind, key.user_id, key.project_id, team_id, org_id),
        cache_ttl_s=0.0 if personal else levels[0].cache_ttl_s or 0.0,
    )


def max_key_ttl(levels: list[Scope], auth: Auth) -> timedelta | None:
    """The longest lifetime a new key under `levels` may have: the shortest bound among
    `auth.max_key_ttl` and the levels' own; None is unbounded."""
    bounds = [timedelta(seconds=lv.max_key_ttl_s) for lv in levels if lv.max_key_ttl_s]
    if auth.effective_max_key_ttl is not None:
        bounds.append(auth.effective_max_key_ttl)
    return min(bounds) if bounds else None
