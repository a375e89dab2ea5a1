"""SCIM PATCH applied to a resource as JSON, with the messages Entra ID and Okta send
(from their provisioning documentation), and the refusals of messages that are not one."""

from __future__ import annotations

from typing import Any

import pytest

from llmgw.identity.scim.errors import ScimError
from llmgw.identity.scim.patch import PATCH_SCHEMA, apply_patch, parse_path

ENTERPRISE = "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"


def _user() -> dict[str, Any]:
    return {
        "schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"],
        "id": "ada@contoso.com",
        "userName": "ada@contoso.com",
        "displayName": "Ada",
        "name": {"formatted": "Ada"},
        "emails": [{"value": "ada@contoso.com", "type": "work", "primary": True}],
        "active": True,
    }


def _group(*members: str) -> dict[str, Any]:
    return {"id": "g1", "displayName": "Research", "members": [{"value": m, "display": m} for m in members]}


def _patch(*operations: dict[str, Any]) -> dict[str, Any]:
    return {"schemas": [PATCH_SCHEMA], "Operations": list(operations)}


# --- Entra ID ------------------------------------------------------------------------


def test_entra_disables_with_a_capitalised_replace_and_a_string_boolean() -> None:
    patched = apply_patch(_user(), _patch({"op": "Replace", "path": "active", "value": "False"}))
    assert patched["active"] == "False"  # read as a boolean by the resource mapping


def test_entra_changes_several_attributes_by_path() -> None:
    patched = apply_patch(
        _user(),
        _patch(
            {"op": "Replace", "path": "userName", "value": "ada.king@contoso.com"},
            {"op": "Replace", "path": "name.formatted", "value": "Ada King"},
            {"op": "Add", "path": "name.givenName", "value": "Ada"},
            {"op": "Replace", "path": 'emails[type eq "work"].value', "value": "ada.king@contoso.com"},
            {"op": "Add", "path": f"{ENTERPRISE}:department", "value": "Research"},
        ),
    )
    assert patched["userName"] == "ada.king@contoso.com"
    assert patched["name"] == {"formatted": "Ada King", "givenName": "Ada"}
    assert patched["emails"] == [{"value": "ada.king@contoso.com", "type": "work", "primary": True}]
    assert patched[ENTERPRISE] == {"department": "Research"}


def test_entra_sets_a_first_address_through_a_filter_that_matches_nothing_yet() -> None:
    user = _user()
    del user["emails"]
    patched = apply_patch(
        user, _patch({"op": "Add", "path": 'emails[type eq "work"].value', "value": "a@b.c"})
    )
    assert patched["emails"] == [{"type": "work", "value": "a@b.c"}]


def test_entra_adds_and_removes_members_by_listing_them() -> None:
    added = apply_patch(
        _group("u1"),
        _patch({"op": "Add", "path": "members", "value": [{"value": "u2"}, {"value": "u1"}]}),
    )
    assert [m["value"] for m in added["members"]] == ["u1", "u2"]
    removed = apply_patch(added, _patch({"op": "Remove", "path": "members", "value": [{"value": "u1"}]}))
    assert [m["value"] for m in removed["members"]] == ["u2"]


def test_entra_removes_a_member_by_a_filter_path() -> None:
    patched = apply_patch(_group("u1", "u2"), _patch({"op": "Remove", "path": 'members[value eq "u2"]'}))
    assert [m["value"] for m in patched["members"]] == ["u1"]


def test_entra_renames_a_group_by_path() -> None:
    patched = apply_patch(_group(), _patch({"op": "Replace", "path": "displayName", "value": "Research 2"}))
    assert patched["displayName"] == "Research 2"


# --- Okta ----------------------------------------------------------------------------


def test_okta_deactivates_with_a_replace_without_path() -> None:
    patched = apply_patch(_user(), _patch({"op": "replace", "value": {"active": False}}))
    assert patched["active"] is False
    assert patched["displayName"] == "Ada"


def test_okta_replaces_all_of_a_groups_members() -> None:
    patched = apply_patch(
        _group("u1", "u2"),
        _patch({"op": "replace", "path": "members", "value": [{"value": "u3", "display": "c"}]}),
    )
    assert patched["members"] == [{"value": "u3", "display": "c"}]


def test_okta_renames_a_group_with_its_id_in_the_value() -> None:
    patched = apply_patch(
        _group("u1"), _patch({"op": "replace", "value": {"id": "g1", "displayName": "New"}})
    )
    assert patched["displayName"] == "New"
    assert patched["id"] == "g1"
    assert [m["value"] for m in patched["members"]] == ["u1"]


def test_okta_adds_members_without_doubling_one_already_in() -> None:
    patched = apply_patch(_group("u1"), _patch({"op": "add", "path": "members", "value": [{"value": "u1"}]}))
    assert [m["value"] for m in patched["members"]] == ["u1"]


# --- general rules -------------------------------------------------------------------


def test_attribute_names_match_without_case_and_complex_values_merge() -> None:
    patched = apply_patch(
        _user(),
        _patch(
            {"op": "replace", "path": "DisplayName", "value": "A"},
            {"op": "replace", "path": "name", "value": {"givenName": "Ada"}},
        ),
    )
    assert patched["displayName"] == "A"
    assert "DisplayName" not in patched
    assert patched["name"] == {"formatted": "Ada", "givenName": "Ada"}


def test_a_core_schema_urn_in_a_path_or_a_value_names_the_core_attribute() -> None:
    core = "urn:ietf:params:scim:schemas:core:2.0:User"
    patched = apply_patch(
        _user(),
        _patch(
            {"op": "replace", "path": f"{core}:displayName", "value": "B"},
            {"op": "replace", "value": {core: {"active": False}, ENTERPRISE: {"manager": {"value": "m"}}}},
        ),
    )
    assert patched["displayName"] == "B"
    assert patched["active"] is False
    assert patched[ENTERPRISE] == {"manager": {"value": "m"}}


def test_remove_by_path_drops_the_attribute() -> None:
    patched = apply_patch(_user(), _patch({"op": "remove", "path": "displayName"}))
    assert "displayName" not in patched


def test_the_resource_given_is_left_as_it_was() -> None:
    user = _user()
    apply_patch(user, _patch({"op": "replace", "path": 'emails[type eq "work"].value', "value": "x@y.z"}))
    assert user == _user()


@pytest.mark.parametrize(
    ("message", "scim_type"),
    [
        ([], "invalidSyntax"),
        ({"schemas": [PATCH_SCHEMA]}, "invalidSyntax"),
        (_patch(), "invalidSyntax"),
        (_patch({"op": "move", "path": "active"}), "invalidSyntax"),
        (_patch("replace"), "invalidSyntax"),  # type: ignore[arg-type]
        (_patch({"op": "remove"}), "noTarget"),
        (_patch({"op": "replace", "value": False}), "invalidValue"),
        (_patch({"op": "replace", "path": "emails[type ne 'work']", "value": 1}), "invalidPath"),
        (_patch({"op": "replace", "path": "a..b", "value": 1}), "invalidPath"),
        (_patch({"op": "replace", "path": 7, "value": 1}), "invalidPath"),
        (_patch({"op": "replace", "path": "displayName.first", "value": 1}), "invalidPath"),
    ],
)
def test_a_message_that_is_not_a_patch_is_refused(message: Any, scim_type: str) -> None:
    with pytest.raises(ScimError) as refused:
        apply_patch(_user(), message)
    assert refused.value.status == 400
    assert refused.value.scim_type == scim_type


def test_paths_are_parsed_into_their_parts() -> None:
    path = parse_path('members[value eq "a\\"b"].display')
    assert (path.urn, path.attribute, path.filter, path.sub) == (None, "members", ("value", 'a"b'), "display")
    assert parse_path(f"{ENTERPRISE}:manager").urn == ENTERPRISE
