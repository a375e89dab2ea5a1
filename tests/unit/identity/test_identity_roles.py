"""The authorization rules as a table: who (by their roles) may do what to which thing of
a small tenancy tree, and whether a refusal is 403 (visible) or 404 (hidden)."""

from __future__ import annotations

import pytest

from llmgw.identity.roles import OPERATOR, Action, Actor, Kind, Tree, Verdict, decide
from llmgw.store.people import Role

# acme has teams research (projects chat, eval) and ops (project infra); globex has
# team sales (project crm).
TREE = Tree(
    team_of={"chat": "research", "eval": "research", "infra": "ops", "crm": "sales"},
    org_of={"research": "acme", "ops": "acme", "sales": "globex"},
)

ORG_ADMIN = Actor("olga", (Role("org", "acme", "admin"),))
ORG_MEMBER = Actor("omar", (Role("org", "acme", "member"),))
TEAM_ADMIN = Actor("tina", (Role("team", "research", "admin"),))
TEAM_MEMBER = Actor("tom", (Role("team", "research", "member", "oidc"),))
PROJECT_ADMIN = Actor("pia", (Role("project", "chat", "admin"),))
MEMBER = Actor("mia", (Role("project", "chat", "member"),))
NOBODY = Actor("nora")

A, F, H = Verdict.ALLOW, Verdict.FORBID, Verdict.HIDE

CASES: list[tuple[str, Actor, Action, Kind, str, Verdict]] = [
    # The operator may do everything, even to what does not exist in the tree.
    ("operator manages an org", OPERATOR, "manage", "org", "globex", A),
    ("operator keys anyone", OPERATOR, "keys", "user", "mia", A),
    ("operator manages a person", OPERATOR, "manage", "user", "mia", A),
    # An org admin: everything in their org, nothing outside it.
    ("org admin manages the org", ORG_ADMIN, "manage", "org", "acme", A),
    ("org admin manages a team", ORG_ADMIN, "manage", "team", "ops", A),
    ("org admin manages a project", ORG_ADMIN, "manage", "project", "infra", A),
    ("org admin keys a project", ORG_ADMIN, "keys", "project", "chat", A),
    ("org admin: other org hidden", ORG_ADMIN, "view", "org", "globex", H),
    ("org admin: other org's project hidden", ORG_ADMIN, "keys", "project", "crm", H),
    ("org admin: a person's keys hidden", ORG_ADMIN, "keys", "user", "mia", H),
    # An org member sees the org, no more.
    ("org member sees the org", ORG_MEMBER, "view", "org", "acme", A),
    ("org member may not manage it", ORG_MEMBER, "manage", "org", "acme", F),
    ("org member: its teams hidden", ORG_MEMBER, "view", "team", "research", H),
    # A team admin: that team's projects, their memberships and keys.
    ("team admin sees the team", TEAM_ADMIN, "view", "team", "research", A),
    ("team admin keys the team's projects", TEAM_ADMIN, "keys", "team", "research", A),
    ("team admin may not manage the team", TEAM_ADMIN, "manage", "team", "research", F),
    ("team admin manages a project of it", TEAM_ADMIN, "manage", "project", "eval", A),
    ("team admin keys a project of it", TEAM_ADMIN, "keys", "project", "chat", A),
    ("team admin: other team hidden", TEAM_ADMIN, "view", "team", "ops", H),
    ("team admin: other team's project hidden", TEAM_ADMIN, "keys", "project", "infra", H),
    ("team admin: the org hidden", TEAM_ADMIN, "view", "org", "acme", H),
    # A team member sees the team and its projects, and changes nothing.
    ("team member sees a project", TEAM_MEMBER, "view", "project", "eval", A),
    ("team member may not key it", TEAM_MEMBER, "keys", "project", "eval", F),
    ("team member may not manage it", TEAM_MEMBER, "manage", "project", "eval", F),
    # A project admin keys that project only.
    ("project admin keys it", PROJECT_ADMIN, "keys", "project", "chat", A),
    ("project admin may not manage it", PROJECT_ADMIN, "manage", "project", "chat", F),
    ("project admin: sibling project hidden", PROJECT_ADMIN, "keys", "project", "eval", H),
    ("project admin: the team hidden", PROJECT_ADMIN, "view", "team", "research", H),
    # A member sees their project, keys only themselves.
    ("member sees their project", MEMBER, "view", "project", "chat", A),
    ("member may not key their project", MEMBER, "keys", "project", "chat", F),
    ("member may not manage their project", MEMBER, "manage", "project", "chat", F),
    ("member: another team's project hidden", MEMBER, "keys", "project", "infra", H),
    ("member keys themselves", MEMBER, "keys", "user", "mia", A),
    ("member sees themselves", MEMBER, "view", "user", "mia", A),
    ("member may not manage themselves", MEMBER, "manage", "user", "mia", F),
    ("member: another person hidden", MEMBER, "keys", "user", "tom", H),
    # Nobody with no role sees only themselves.
    ("no role: any project hidden", NOBODY, "view", "project", "chat", H),
    ("no role: any org hidden", NOBODY, "view", "org", "acme", H),
    ("no role keys themselves", NOBODY, "keys", "user", "nora", A),
]


@pytest.mark.parametrize(
    ("actor", "action", "kind", "ident", "verdict"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_rule(actor: Actor, action: Action, kind: Kind, ident: str, verdict: Verdict) -> None:
    assert decide(actor, action, TREE.target(kind, ident)) is verdict


def test_a_project_being_made_is_placed_by_its_parent() -> None:
    assert decide(TEAM_ADMIN, "manage", TREE.target("project", "new", "research")) is A
    assert decide(TEAM_ADMIN, "manage", TREE.target("project", "new", "ops")) is H
    assert decide(TEAM_MEMBER, "manage", TREE.target("project", "new", "research")) is F
    assert decide(ORG_ADMIN, "manage", TREE.target("team", "new", "acme")) is A
    assert decide(ORG_ADMIN, "manage", TREE.target("team", "new", "globex")) is H


def test_admin_wins_where_a_person_holds_two_roles_in_one_scope() -> None:
    both = Actor("x", (Role("team", "research", "member", "oidc"), Role("team", "research", "admin")))
    assert decide(both, "manage", TREE.target("project", "chat")) is A
    reversed_order = Actor("x", tuple(reversed(both.roles)))
    assert decide(reversed_order, "manage", TREE.target("project", "chat")) is A


def test_a_project_missing_from_the_tree_is_hidden_from_everyone_but_the_operator() -> None:
    assert decide(ORG_ADMIN, "view", TREE.target("project", "ghost")) is H
    assert decide(OPERATOR, "view", TREE.target("project", "ghost")) is A
