"""Which limit, budgets, models and band a key gets from the tenancy tree: every scope
and the precedence between them."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from llmgw.auth.policy import max_key_ttl, resolve
from llmgw.auth.principal import Principal
from llmgw.config.auth import Auth, Personal
from llmgw.store.rows import KeyRow, Scope, ScopeKind


def tree(**overrides: dict[str, Any]) -> dict[ScopeKind, dict[str, Scope]]:
    """org o > team t > project p, and person u; `overrides` sets fields per level."""
    made = {
        "org": Scope("org", "o", **overrides.get("org", {})),
        "team": Scope("team", "t", parent="o", **overrides.get("team", {})),
        "project": Scope("project", "p", parent="t", **overrides.get("project", {})),
        "user": Scope("user", "u", **overrides.get("user", {})),
    }
    return {kind: {scope.id: scope} for kind, scope in made.items()}  # type: ignore[misc]


PROJECT_KEY = KeyRow("k1", "h1", project_id="p")
PERSONAL_KEY = KeyRow("k2", "h2", user_id="u")


def principal(key: KeyRow, auth: Auth | None = None, **levels: dict[str, Any]) -> Principal:
    made = resolve(key, tree(**levels), auth or Auth())
    assert made is not None
    return made


@pytest.mark.parametrize(
    ("levels", "key_rpm", "expected"),
    [
        ({}, None, None),
        ({"org": {"rpm": 40}}, None, ("org:o", 40, "org")),
        ({"org": {"rpm": 40}, "team": {"rpm": 30}}, None, ("team:t", 30, "team")),
        (
            {"org": {"rpm": 40}, "team": {"rpm": 30}, "project": {"rpm": 90}},
            None,
            ("project:p", 90, "project"),
        ),
        ({"project": {"rpm": 90}}, 5, ("key:k1", 5, "key")),
        ({"team": {"rpm": 3}, "project": {"rpm": 0}}, None, None),  # an explicit 0 is unlimited
    ],
)
def test_the_most_specific_limit_wins_above_or_below(
    levels: dict[str, dict[str, Any]], key_rpm: int | None, expected: tuple[str, int, str] | None
) -> None:
    key = KeyRow("k1", "h1", project_id="p", rpm=key_rpm)
    rule = principal(key, None, **levels).rpm
    assert (rule.scope, rule.limit, rule.source) == expected if rule else expected is None


def test_default_limits_apply_per_key_where_nothing_is_written() -> None:
    auth = Auth(default_rpm=60, default_tpm=1000)
    p = principal(PROJECT_KEY, auth)
    assert (p.rpm and p.rpm.scope, p.rpm and p.rpm.limit, p.rpm and p.rpm.source) == ("key:k1", 60, "default")
    assert p.tpm is not None
    assert p.tpm.limit == 1000
    # Any explicit limit, larger or smaller, replaces the default.
    assert principal(PROJECT_KEY, auth, org={"rpm": 500}).rpm.limit == 500  # type: ignore[union-attr]
    assert principal(PROJECT_KEY, auth, org={"tpm": 10}).tpm.limit == 10  # type: ignore[union-attr]


def test_personal_limits_key_then_person_then_settings_then_default() -> None:
    auth = Auth(default_rpm=60, personal=Personal(rpm=20))
    assert principal(PERSONAL_KEY, auth).rpm == principal(PERSONAL_KEY, auth).rpm
    assert principal(PERSONAL_KEY, auth).rpm.scope == "user:u"  # type: ignore[union-attr]
    assert principal(PERSONAL_KEY, auth).rpm.source == "personal"  # type: ignore[union-attr]
    assert principal(PERSONAL_KEY, auth, user={"rpm": 200}).rpm.limit == 200  # type: ignore[union-attr]
    keyed = KeyRow("k2", "h2", user_id="u", rpm=7)
    assert principal(keyed, auth, user={"rpm": 200}).rpm.limit == 7  # type: ignore[union-attr]
    assert principal(PERSONAL_KEY, Auth(default_rpm=60)).rpm.source == "default"  # type: ignore[union-attr]


def test_every_budget_up_the_tree_applies_and_none_is_set_by_default() -> None:
    assert principal(PROJECT_KEY).budgets == ()
    p = principal(
        PROJECT_KEY,
        org={"budget_micros": 9_000_000},
        team={"budget_micros": 5_000_000, "budget_period": "day"},
        project={"budget_micros": 0},
    )
    assert [(b.scope, b.budget_micros, b.period) for b in p.budgets] == [
        ("team:t", 5_000_000, "day"),
        ("org:o", 9_000_000, "month"),
    ]
    assert p.spend_scopes == ("project:p", "team:t", "org:o")


def test_a_persons_budget_replaces_the_personal_setting() -> None:
    auth = Auth(personal=Personal(budget=3, period="day"))
    assert [(b.budget_micros, b.period, b.source) for b in principal(PERSONAL_KEY, auth).budgets] == [
        (3_000_000, "day", "personal")
    ]
    own = principal(PERSONAL_KEY, auth, user={"budget_micros": 10, "budget_period": "month"})
    assert [(b.budget_micros, b.source) for b in own.budgets] == [(10, "user")]
    assert principal(PERSONAL_KEY, auth, user={"budget_micros": 0}).budgets == ()


def test_models_allowed_at_every_level_that_restricts_them() -> None:
    p = principal(
        PROJECT_KEY, org={"allowed_models": ("a", "b", "c")}, project={"allowed_models": ("b", "c", "d")}
    )
    assert [p.allows(m) for m in "abcd"] == [False, True, True, False]
    assert principal(PROJECT_KEY).allows("anything")
    assert not principal(PERSONAL_KEY, user={"allowed_models": ()}).allows("a")


def test_owners_of_adapters() -> None:
    p = principal(PROJECT_KEY)
    assert p.owns("org:o")
    assert p.owns("team:t")
    assert p.owns("project:p")
    assert p.owns("key:k1")
    assert not p.owns("team:other")
    assert not p.owns("user:u")
    assert not p.owns("garbage")
    assert principal(PERSONAL_KEY).owns("user:u")


def test_band_from_the_key_else_its_project() -> None:
    assert principal(PROJECT_KEY).band is None
    assert principal(PROJECT_KEY, project={"band": "silver"}, team={"band": "gold"}).band == "silver"
    keyed = KeyRow("k1", "h1", project_id="p", band="platinum")
    assert principal(keyed, project={"band": "silver"}).band == "platinum"


def test_unusable_keys() -> None:
    assert resolve(PERSONAL_KEY, tree(), Auth(personal=Personal(disabled=True))) is None
    assert resolve(PERSONAL_KEY, tree(user={"disabled": True}), Auth()) is None
    assert resolve(KeyRow("k", "h", project_id="gone"), tree(), Auth()) is None


def test_key_lifetime_is_the_shortest_bound() -> None:
    levels = list(tree(team={"max_key_ttl_s": 3600.0}, org={"max_key_ttl_s": 7200.0}).values())
    flat = [next(iter(level.values())) for level in levels]
    assert max_key_ttl(flat, Auth()) == timedelta(hours=1)
    assert max_key_ttl(flat, Auth(max_key_ttl=timedelta(minutes=5))) == timedelta(minutes=5)
    assert max_key_ttl([], Auth()) is None
