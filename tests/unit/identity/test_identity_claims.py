"""From claims to a profile: the mapping of auth.oidc.claims, the groups claim in the
shapes providers send it, allowed_domains, and the ids a new person may get."""

from __future__ import annotations

import itertools

import pytest

from llmgw.config.identity import OIDCClaims
from llmgw.errors import SignInRefused
from llmgw.identity.claims import MAX_GROUPS, check_domain, person_ids, profile


def test_the_mapping_names_the_claims_read() -> None:
    mapping = OIDCClaims(username="upn", email="mail", name="display", groups="roles")
    found = profile(
        {"sub": "s1", "upn": "Ada.L", "mail": "Ada@Example.COM", "display": "Ada", "roles": ["b", "a", "a"]},
        mapping,
    )
    assert (found.username, found.email, found.name, found.groups) == (
        "Ada.L",
        "ada@example.com",
        "Ada",
        ("a", "b"),
    )


@pytest.mark.parametrize(
    ("value", "groups"),
    [("solo", ("solo",)), (None, ()), (42, ()), (["x", 3, "", "y"], ("x", "y"))],
)
def test_groups_in_any_shape_become_names(value: object, groups: tuple[str, ...]) -> None:
    assert profile({"sub": "s", "groups": value}, OIDCClaims()).groups == groups


def test_groups_are_bounded_and_an_empty_mapping_reads_none() -> None:
    many = [f"g{i}" for i in range(MAX_GROUPS * 2)]
    assert len(profile({"sub": "s", "groups": many}, OIDCClaims()).groups) == MAX_GROUPS
    assert profile({"sub": "s", "groups": ["x"]}, OIDCClaims(groups="")).groups == ()


def test_a_claim_of_the_wrong_type_is_left_out() -> None:
    found = profile({"sub": "s", "email": ["a@b.c"], "name": 7}, OIDCClaims())
    assert found.email is None
    assert found.name is None


def test_allowed_domains_refuse_others_and_addressless_people() -> None:
    allowed = ("example.com",)
    check_domain(profile({"sub": "s", "email": "a@example.com"}, OIDCClaims()), allowed)
    check_domain(profile({"sub": "s"}, OIDCClaims()), ())
    with pytest.raises(SignInRefused, match=r"elsewhere\.org may not sign in") as other:
        check_domain(profile({"sub": "s", "email": "a@elsewhere.org"}, OIDCClaims()), allowed)
    assert other.value.code == "domain_not_allowed"
    # A subdomain is another domain: listing it is the operator's choice.
    with pytest.raises(SignInRefused):
        check_domain(profile({"sub": "s", "email": "a@mail.example.com"}, OIDCClaims()), allowed)
    with pytest.raises(SignInRefused, match="no e-mail address"):
        check_domain(profile({"sub": "s"}, OIDCClaims()), allowed)


def test_ids_are_safe_then_numbered_then_from_the_subject() -> None:
    ids = list(person_ids(profile({"sub": "s1", "preferred_username": "Ada Lovelace/../x"}, OIDCClaims())))
    assert ids[0] == "ada-lovelace-..-x"
    assert ids[1] == "ada-lovelace-..-x-2"
    assert ids[-1].startswith("oidc-")
    assert len(ids) == len(set(ids)) == 10
    no_name = list(itertools.islice(person_ids(profile({"sub": "s1"}, OIDCClaims())), 3))
    assert len(no_name) == 1
    assert no_name[0].startswith("oidc-")
