"""One SCIM request as the handlers see it, and the small readings every handler
shares: the JSON body, the page asked for, and the version an `If-Match` names."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from llmgw.identity.scim.discovery import MAX_RESULTS
from llmgw.identity.scim.errors import ScimError, invalid_value

DEFAULT_COUNT = 100


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    parts: tuple[str, ...]
    """The path below /scim/v2, split at `/`."""
    query: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    if_match: str | None = None
    base_url: str = ""
    """Where /scim/v2 is, as the client reached it, for `meta.location`."""

    def json(self) -> Any:
        """The body as JSON; 400 invalidSyntax when it is not."""
        if not self.body.strip():
            raise ScimError(400, "the request has no body: send the resource as JSON", "invalidSyntax")
        try:
            return orjson.loads(self.body)
        except orjson.JSONDecodeError as exc:
            raise ScimError(400, f"the body is not JSON: {exc}", "invalidSyntax") from None

    def page(self) -> tuple[int, int]:
        """`startIndex` (1-based; below 1 counts as 1) and `count` (capped at
        MAX_RESULTS; below 0 counts as 0), as RFC 7644 §3.4.2.4 reads them."""
        start = _integer(self.query, "startIndex", 1)
        count = _integer(self.query, "count", DEFAULT_COUNT)
        return max(start, 1), min(max(count, 0), MAX_RESULTS)

    def expected_version(self) -> int | None:
        """The version `If-Match` names (None without one, or for `*`); 412 for a value
        that names no version of ours."""
        if self.if_match is None:
            return None
        text = self.if_match.strip()
        if text == "*":
            return None
        tag = text.removeprefix("W/").strip('"')
        if not tag.isdigit():
            raise ScimError(412, f"If-Match {self.if_match!r} is no version of this resource: read it again")
        return int(tag)

    def excluded_members(self) -> bool:
        """Whether the client asked to leave groups' members out (Entra ID does, with
        `excludedAttributes=members`, to keep large groups cheap)."""
        excluded = {name.strip().lower() for name in self.query.get("excludedAttributes", "").split(",")}
        if "members" in excluded:
            return True
        wanted = self.query.get("attributes")
        return wanted is not None and "members" not in {name.strip().lower() for name in wanted.split(",")}


def _integer(query: dict[str, str], name: str, default: int) -> int:
    text = query.get(name)
    if text is None or text == "":
        return default
    try:
        return int(text)
    except ValueError:
        raise invalid_value(f"{name} must be an integer, not {text!r}") from None
