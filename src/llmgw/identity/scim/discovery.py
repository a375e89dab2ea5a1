"""What /scim/v2 says about itself (RFC 7644 §4): ServiceProviderConfig, ResourceTypes
and Schemas, so a provider (or an operator testing the connection) learns what is
supported: PATCH and ETags yes; bulk, sorting and password changes no; filters of one
`eq`, at most `MAX_RESULTS` resources a page."""

from __future__ import annotations

from typing import Any

from llmgw.identity.scim.resources import GROUP_SCHEMA, LIST_SCHEMA, USER_SCHEMA

MAX_RESULTS = 200
"""The most resources one page of a list holds, whatever `count` asks."""
CONFIG_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig"
RESOURCE_TYPE_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:ResourceType"
SCHEMA_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:Schema"


def service_provider_config(base_url: str) -> dict[str, Any]:
    return {
        "schemas": [CONFIG_SCHEMA],
        "patch": {"supported": True},
        "bulk": {"supported": False, "maxOperations": 0, "maxPayloadSize": 0},
        "filter": {"supported": True, "maxResults": MAX_RESULTS},
        "changePassword": {"supported": False},
        "sort": {"supported": False},
        "etag": {"supported": True},
        "authenticationSchemes": [
            {
                "type": "oauthbearertoken",
                "name": "Bearer token",
                "description": "The token in auth.scim.token_file, as Authorization: Bearer <token>",
                "primary": True,
            }
        ],
        "meta": {"resourceType": "ServiceProviderConfig", "location": f"{base_url}/ServiceProviderConfig"},
    }


def resource_types(base_url: str) -> list[dict[str, Any]]:
    return [
        {
            "schemas": [RESOURCE_TYPE_SCHEMA],
            "id": name,
            "name": name,
            "endpoint": f"/{name}s",
            "description": description,
            "schema": schema,
            "meta": {"resourceType": "ResourceType", "location": f"{base_url}/ResourceTypes/{name}"},
        }
        for name, schema, description in (
            ("User", USER_SCHEMA, "A person of llmgw; userName is their llmgw id"),
            ("Group", GROUP_SCHEMA, "A group of the identity provider; teams follow it by displayName"),
        )
    ]


def _attribute(name: str, kind: str = "string", **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "type": kind,
        "multiValued": False,
        "required": False,
        "caseExact": False,
        "mutability": "readWrite",
        "returned": "default",
        "uniqueness": "none",
        **extra,
    }


def schemas(base_url: str) -> list[dict[str, Any]]:
    user_attributes = [
        _attribute("userName", required=True, uniqueness="server", mutability="immutable"),
        _attribute("displayName"),
        _attribute(
            "name",
            "complex",
            subAttributes=[_attribute("formatted"), _attribute("givenName"), _attribute("familyName")],
        ),
        _attribute(
            "emails",
            "complex",
            multiValued=True,
            subAttributes=[_attribute("value"), _attribute("type"), _attribute("primary", "boolean")],
        ),
        _attribute("externalId", caseExact=True, uniqueness="server"),
        _attribute("active", "boolean"),
    ]
    group_attributes = [
        _attribute("displayName", required=True, uniqueness="server"),
        _attribute("externalId", caseExact=True, uniqueness="server"),
        _attribute(
            "members",
            "complex",
            multiValued=True,
            subAttributes=[_attribute("value", mutability="immutable"), _attribute("display")],
        ),
    ]
    return [
        {
            "schemas": [SCHEMA_SCHEMA],
            "id": ident,
            "name": name,
            "attributes": attributes,
            "meta": {"resourceType": "Schema", "location": f"{base_url}/Schemas/{ident}"},
        }
        for ident, name, attributes in (
            (USER_SCHEMA, "User", user_attributes),
            (GROUP_SCHEMA, "Group", group_attributes),
        )
    ]


def list_response(resources: list[dict[str, Any]], total: int, start_index: int) -> dict[str, Any]:
    return {
        "schemas": [LIST_SCHEMA],
        "totalResults": total,
        "itemsPerPage": len(resources),
        "startIndex": start_index,
        "Resources": resources,
    }
