"""SCIM filters (RFC 7644 §3.4.2.2), the part identity providers use: one attribute
compared for equality, `userName eq "ada@example.com"`.

Entra ID and Okta look a resource up by one unique attribute before creating it, and
never send more; so `eq` on the attributes a resource type allows is all that is taken,
and anything else (another operator, `and`/`or`, an unknown attribute, a value that is
not a JSON string) is refused as `invalidFilter` naming what is accepted, rather than
answered with a list the provider would misread. Pure: text in, `Equals` out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import orjson

from llmgw.identity.scim.errors import ScimError

# attribute, operator, value; the value's quotes and escapes are JSON's, decoded below.
_FILTER = re.compile(
    r'^\s*(?P<attr>[A-Za-z][\w.:$-]*)\s+(?P<op>[A-Za-z]{2})\s+(?P<value>".*"|\S+)\s*$', re.DOTALL
)
# A core schema's URN in front of an attribute names the same attribute.
_CORE_PREFIX = re.compile(r"^urn:ietf:params:scim:schemas:core:2\.0:(?:User|Group):", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Equals:
    """`attribute eq value`, with the attribute's canonical name."""

    attribute: str
    value: str


def parse_filter(text: str, attributes: Mapping[str, str]) -> Equals:
    """The filter `text`, whose attribute must be one of `attributes` (lower-cased name
    to canonical name); `ScimError` 400 invalidFilter otherwise."""
    allowed = ", ".join(f'{name} eq "…"' for name in sorted(set(attributes.values())))
    match = _FILTER.match(text)
    if match is None:
        raise ScimError(
            400, f"filter {text!r} is not understood: this server takes one of {allowed}", "invalidFilter"
        )
    name = _CORE_PREFIX.sub("", match["attr"])
    attribute = attributes.get(name.lower())
    if attribute is None:
        raise ScimError(
            400,
            f"filter attribute {match['attr']!r} is not filterable here: use one of {allowed}",
            "invalidFilter",
        )
    if match["op"].lower() != "eq":
        raise ScimError(
            400,
            f"filter operator {match['op']!r} is not supported: only eq is, as in {allowed}",
            "invalidFilter",
        )
    try:
        value = orjson.loads(match["value"])
    except orjson.JSONDecodeError:
        value = None
    if not isinstance(value, str):
        raise ScimError(
            400,
            f'filter value {match["value"]!r} is not one quoted string: write {attribute} eq "value"',
            "invalidFilter",
        )
    return Equals(attribute, value)
