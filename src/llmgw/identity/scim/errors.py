"""SCIM's refusals: an exception carrying the status, `scimType` and detail, and the
body RFC 7644 §3.12 gives them, so an identity provider reads why it was refused."""

from __future__ import annotations

import orjson

from llmgw.errors import LlmgwError

ERROR_SCHEMA = "urn:ietf:params:scim:api:messages:2.0:Error"
CONTENT_TYPE = "application/scim+json"


class ScimError(LlmgwError):
    """A refusal in SCIM's shape. `scim_type` is one of RFC 7644's (invalidFilter,
    invalidSyntax, invalidPath, invalidValue, noTarget, mutability, uniqueness, tooMany)
    or None where the status says it all (401, 404, 412)."""

    def __init__(self, status: int, detail: str, scim_type: str | None = None) -> None:
        self.status = status
        self.detail = detail
        self.scim_type = scim_type
        super().__init__(detail)


def error_body(status: int, detail: str, scim_type: str | None = None) -> bytes:
    """The JSON of a SCIM error; `status` is a string there, as the RFC has it."""
    body: dict[str, object] = {"schemas": [ERROR_SCHEMA], "status": str(status), "detail": detail}
    if scim_type is not None:
        body["scimType"] = scim_type
    return orjson.dumps(body)


def invalid_value(detail: str) -> ScimError:
    return ScimError(400, detail, "invalidValue")
