"""The SCIM filter parser: what Entra ID and Okta send is read, anything else is refused
as invalidFilter with a message naming what is accepted."""

from __future__ import annotations

import pytest

from llmgw.identity.scim.errors import ScimError
from llmgw.identity.scim.filter import Equals, parse_filter

USERS = {"username": "userName", "externalid": "externalId", "id": "id"}
GROUPS = {"displayname": "displayName", "externalid": "externalId"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Entra ID's connection test and matching, and Okta's import.
        ('userName eq "ada@example.com"', Equals("userName", "ada@example.com")),
        (
            'userName eq "8f3b0c2e-6a7d-4bd4-9d65-6c0d2f3b3a11"',
            Equals("userName", "8f3b0c2e-6a7d-4bd4-9d65-6c0d2f3b3a11"),
        ),
        ('externalId eq "0a1b2c"', Equals("externalId", "0a1b2c")),
        # Attribute and operator names are case-insensitive; the value keeps its case.
        ('USERNAME EQ "Ada@Example.com"', Equals("userName", "Ada@Example.com")),
        ('urn:ietf:params:scim:schemas:core:2.0:User:userName eq "ada"', Equals("userName", "ada")),
        # JSON escapes in the value are decoded.
        (r'userName eq "a\"b"', Equals("userName", 'a"b')),
        ('  userName   eq   "spaced"  ', Equals("userName", "spaced")),
    ],
)
def test_filters_providers_send_are_read(text: str, expected: Equals) -> None:
    assert parse_filter(text, USERS) == expected


def test_group_filters_use_the_groups_attributes() -> None:
    assert parse_filter('displayName eq "Research"', GROUPS) == Equals("displayName", "Research")
    with pytest.raises(ScimError) as refused:
        parse_filter('userName eq "x"', GROUPS)
    assert refused.value.scim_type == "invalidFilter"
    assert "displayName eq" in refused.value.detail


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('userName co "ada"', "operator 'co'"),
        ('userName sw "ada"', "operator 'sw'"),
        ('emails eq "ada@example.com"', "attribute 'emails'"),
        ('userName eq "a" and externalId eq "b"', "not one quoted string"),
        ("userName eq ada", "not one quoted string"),
        ("userName eq 42", "not one quoted string"),
        ('userName eq "unterminated', "not one quoted string"),
        ("userName pr", "not understood"),
        ("", "not understood"),
        ('(userName eq "a")', "not understood"),
    ],
)
def test_anything_else_is_an_invalid_filter_naming_the_problem(text: str, named: str) -> None:
    with pytest.raises(ScimError) as refused:
        parse_filter(text, USERS)
    assert refused.value.status == 400
    assert refused.value.scim_type == "invalidFilter"
    assert named in refused.value.detail
