"""SCIM Users and Groups to llmgw's people and groups and back, the reading of a
request's page and If-Match, and the token's file or env: reference."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from llmgw.errors import ConfigError
from llmgw.identity.scim.errors import ScimError
from llmgw.identity.scim.request import Request
from llmgw.identity.scim.resources import group_from_json, group_json, person_from_json, user_json
from llmgw.identity.scim.token import read_token
from llmgw.store.provisioning import IdpGroup, ProvisionedPerson

BASE = "http://gw.example/scim/v2"


def test_a_user_becomes_a_person_whose_id_is_the_user_name_when_it_fits() -> None:
    person = person_from_json(
        {
            "userName": "ada@contoso.com",
            "name": {"givenName": "Ada", "familyName": "Lovelace"},
            "emails": [{"value": "home@x.org", "type": "home"}, {"value": "ada@contoso.com", "type": "work"}],
            "externalId": "e-1",
            "active": "True",
        }
    )
    assert person == ProvisionedPerson(
        id="ada@contoso.com",
        user_name="ada@contoso.com",
        email="ada@contoso.com",
        name="Ada Lovelace",
        external_id="e-1",
        active=True,
    )


def test_display_name_and_the_primary_address_come_first() -> None:
    person = person_from_json(
        {
            "userName": "Ada Lovelace (contractor)",
            "displayName": "Ada L.",
            "name": {"formatted": "Ada Lovelace"},
            "emails": [{"value": "w@x.org", "type": "work"}, {"value": "p@x.org", "primary": "true"}],
            "active": False,
        }
    )
    assert person.id == ""  # not an llmgw id: the store makes one
    assert (person.name, person.email, person.active) == ("Ada L.", "p@x.org", False)


def test_a_changed_user_name_keeps_the_llmgw_id() -> None:
    current = ProvisionedPerson(id="ada@contoso.com", user_name="ada@contoso.com", version=4)
    changed = person_from_json({"userName": "ada.king@contoso.com"}, current)
    assert (changed.id, changed.user_name, changed.version) == ("ada@contoso.com", "ada.king@contoso.com", 4)


@pytest.mark.parametrize(
    "body",
    [
        {"active": True},
        {"userName": 7},
        {"userName": "a", "active": "maybe"},
        {"userName": "a", "emails": "a@b.c"},
        [{"userName": "a"}],
    ],
)
def test_a_body_that_is_no_user_is_refused(body: Any) -> None:
    with pytest.raises(ScimError) as refused:
        person_from_json(body)
    assert refused.value.status == 400


def test_a_person_renders_as_a_user_with_meta_and_etag() -> None:
    person = ProvisionedPerson(
        id="u-1", user_name="ada", email="a@b.c", name="Ada", external_id="e", active=False, version=3
    )
    user = user_json(person, BASE)
    assert user["id"] == "u-1"
    assert user["userName"] == "ada"
    assert user["active"] is False
    assert user["emails"] == [{"value": "a@b.c", "type": "work", "primary": True}]
    assert user["meta"]["version"] == 'W/"3"'
    assert user["meta"]["location"] == f"{BASE}/Users/u-1"
    assert person_from_json(user, person) == person


def test_groups_map_members_both_ways() -> None:
    group = group_from_json(
        {"displayName": "Research", "members": [{"value": "a"}, {"Value": "b"}, {"value": "a"}]}, "g"
    )
    assert group == IdpGroup(id="g", display_name="Research", members=("a", "b"))
    rendered = group_json(group, BASE)
    assert [m["value"] for m in rendered["members"]] == ["a", "b"]
    assert "members" not in group_json(group, BASE, with_members=False)
    bodies: list[dict[str, Any]] = [
        {"members": []},
        {"displayName": "x", "members": [{"display": "a"}]},
        {"displayName": "x", "members": {}},
    ]
    for bad in bodies:
        with pytest.raises(ScimError):
            group_from_json(bad, "g")


def test_a_page_is_read_as_the_rfc_says() -> None:
    assert Request("GET", ("Users",)).page() == (1, 100)
    assert Request("GET", ("Users",), {"startIndex": "0", "count": "-3"}).page() == (1, 0)
    assert Request("GET", ("Users",), {"startIndex": "11", "count": "5000"}).page() == (11, 200)
    with pytest.raises(ScimError):
        Request("GET", ("Users",), {"count": "x"}).page()


def test_if_match_names_a_version() -> None:
    assert Request("PUT", (), if_match='W/"7"').expected_version() == 7
    assert Request("PUT", (), if_match='"7"').expected_version() == 7
    assert Request("PUT", (), if_match="*").expected_version() is None
    assert Request("PUT", ()).expected_version() is None
    with pytest.raises(ScimError) as refused:
        Request("PUT", (), if_match='W/"abc"').expected_version()
    assert refused.value.status == 412


def test_the_token_comes_from_a_file_or_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = "0123456789abcdef0123"
    (tmp_path / "token").write_text(token + "\n")
    assert read_token(str(tmp_path / "token")) == token
    monkeypatch.setenv("SCIM_TOKEN_FOR_TEST", token)
    assert read_token("env:SCIM_TOKEN_FOR_TEST") == token


@pytest.mark.parametrize(
    ("reference", "named"),
    [
        ("env:SCIM_TOKEN_UNSET_FOR_TEST", "SCIM_TOKEN_UNSET_FOR_TEST is unset or empty"),
        ("vault:secret/llmgw/scim#token", "was not read from Vault: configure secrets.vault"),
        ("/nonexistent/scim-token", "cannot read /nonexistent/scim-token"),
    ],
)
def test_a_token_that_cannot_be_had_names_the_setting_and_the_fix(reference: str, named: str) -> None:
    with pytest.raises(ConfigError) as refused:
        read_token(reference)
    assert "auth.scim.token_file" in str(refused.value)
    assert named in str(refused.value)


def test_a_short_token_is_refused(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("short\n")
    with pytest.raises(ConfigError, match="openssl rand"):
        read_token(str(tmp_path / "token"))
