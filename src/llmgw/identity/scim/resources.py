"""SCIM Users and Groups as JSON (RFC 7643), to and from llmgw's people and groups.

A User is an llmgw person. Its SCIM `id` is the person's llmgw id, which keys,
memberships and usage name and which never changes: the `userName` it was first
provisioned with when that fits an llmgw id (letters, digits, `. _ @ + -`) and is free,
else a generated `u-…`. `userName` is kept beside it and may change. `displayName`
(else `name.formatted`, else given and family names) is the person's name, the primary
e-mail (else the work one, else the first) their address, `externalId` the provider's
own id, and `active` the opposite of `disabled`. Other attributes are accepted and not
kept. A Group's `members` are people's SCIM ids.

Entra ID sends booleans as the strings "True" and "False" unless told otherwise, so
those are read as booleans here.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from llmgw.identity.scim.errors import ScimError, invalid_value
from llmgw.store.provisioning import IdpGroup, ProvisionedPerson

USER_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:User"
GROUP_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:Group"
LIST_SCHEMA = "urn:ietf:params:scim:api:messages:2.0:ListResponse"
# What an llmgw id may be (the admin API's rule): an e-mail address or a login name fits.
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$")
_MAX_TEXT = 1024


def timestamp(seconds: float) -> str:
    """RFC 3339 in UTC, as SCIM's `meta` dates are."""
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def etag(version: int) -> str:
    return f'W/"{version}"'


def _meta(
    kind: str, ident: str, version: int, created: float, updated: float, base_url: str
) -> dict[str, Any]:
    return {
        "resourceType": kind,
        "created": timestamp(created),
        "lastModified": timestamp(updated),
        "location": f"{base_url}/{kind}s/{ident}",
        "version": etag(version),
    }


def user_json(person: ProvisionedPerson, base_url: str) -> dict[str, Any]:
    out: dict[str, Any] = {"schemas": [USER_SCHEMA], "id": person.id, "userName": person.user_name}
    if person.external_id is not None:
        out["externalId"] = person.external_id
    if person.name:
        out["displayName"] = person.name
        out["name"] = {"formatted": person.name}
    if person.email:
        out["emails"] = [{"value": person.email, "type": "work", "primary": True}]
    out["active"] = person.active
    out["meta"] = _meta("User", person.id, person.version, person.created_at, person.updated_at, base_url)
    return out


def group_json(group: IdpGroup, base_url: str, *, with_members: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {"schemas": [GROUP_SCHEMA], "id": group.id, "displayName": group.display_name}
    if group.external_id is not None:
        out["externalId"] = group.external_id
    if with_members:
        out["members"] = [
            {"value": member, "display": member, "$ref": f"{base_url}/Users/{member}"}
            for member in group.members
        ]
    out["meta"] = _meta("Group", group.id, group.version, group.created_at, group.updated_at, base_url)
    return out


def person_from_json(data: Any, current: ProvisionedPerson | None = None) -> ProvisionedPerson:
    """The person a User body describes; `current` is the one it replaces (PUT, PATCH),
    whose id it keeps. An empty id asks the store for a new one. 400 for a body that
    is not a User."""
    attrs = _object(data, "User")
    user_name = _text(attrs, "userName")
    if user_name is None:
        raise invalid_value("userName is required: the person's login, such as their e-mail address")
    fits = _ID.match(user_name) is not None
    ident = current.id if current is not None else (user_name if fits else "")
    return ProvisionedPerson(
        id=ident,
        user_name=user_name,
        email=_email(attrs),
        name=_display_name(attrs),
        external_id=_text(attrs, "externalId"),
        active=_boolean(attrs.get("active", True), "active"),
        version=current.version if current else 1,
        created_at=current.created_at if current else 0.0,
        updated_at=current.updated_at if current else 0.0,
    )


def group_from_json(data: Any, ident: str, current: IdpGroup | None = None) -> IdpGroup:
    """The group a Group body describes, under `ident`. 400 for a body that is not one."""
    attrs = _object(data, "Group")
    name = _text(attrs, "displayName")
    if not name:
        raise invalid_value("displayName is required: the group's name, which teams name in idp_group")
    members = attrs.get("members")
    if members is None:
        members = []
    if not isinstance(members, list):
        raise invalid_value('members must be a list of {"value": "<user id>"}')
    ids: list[str] = []
    for index, member in enumerate(members):
        value = _lower_keys(member).get("value") if isinstance(member, dict) else None
        if not isinstance(value, str) or not value:
            raise invalid_value(f'members[{index}] has no value: each member is {{"value": "<user id>"}}')
        ids.append(value)
    return IdpGroup(
        id=ident,
        display_name=name,
        external_id=_text(attrs, "externalId"),
        members=tuple(dict.fromkeys(ids)),
        version=current.version if current else 1,
        created_at=current.created_at if current else 0.0,
        updated_at=current.updated_at if current else 0.0,
    )


def _object(data: Any, kind: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ScimError(400, f"a {kind} is a JSON object", "invalidSyntax")
    return _lower_keys(data)


def _lower_keys(data: dict[str, Any]) -> dict[str, Any]:
    """SCIM's attribute names are case-insensitive; read them lower-cased."""
    return {key.lower(): value for key, value in data.items()}


def _text(attrs: dict[str, Any], name: str) -> str | None:
    value = attrs.get(name.lower())
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > _MAX_TEXT:
        raise invalid_value(f"{name} must be a string of at most {_MAX_TEXT} characters")
    return value.strip() or None


def _boolean(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise invalid_value(f"{name} must be true or false, not {value!r}")


def _display_name(attrs: dict[str, Any]) -> str | None:
    shown = _text(attrs, "displayName")
    if shown:
        return shown
    name = attrs.get("name")
    if not isinstance(name, dict):
        return None
    parts = _lower_keys(name)
    formatted = _text(parts, "formatted")
    if formatted:
        return formatted
    given, family = _text(parts, "givenName"), _text(parts, "familyName")
    return " ".join(part for part in (given, family) if part) or None


def _email(attrs: dict[str, Any]) -> str | None:
    emails = attrs.get("emails")
    if emails is None:
        return None
    if not isinstance(emails, list):
        raise invalid_value('emails must be a list of {"value": "…", "type": "work", "primary": true}')
    entries = [_lower_keys(entry) for entry in emails if isinstance(entry, dict)]
    entries = [entry for entry in entries if isinstance(entry.get("value"), str) and entry["value"].strip()]
    if not entries:
        return None
    chosen = next((e for e in entries if _boolean(e.get("primary", False), "emails.primary")), None)
    chosen = chosen or next((e for e in entries if str(e.get("type", "")).lower() == "work"), entries[0])
    return _text(chosen, "value")
