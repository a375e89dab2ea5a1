"""What the Files and Batch applications share on the wire: who is calling (the auth
gate's principal, the owner its files belong to, its key's hash), JSON answers, list
paging from the query string, and refusals in OpenAI's error shape."""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import orjson

from llmgw.auth.gate import AuthGate
from llmgw.auth.keys import bearer_token, hash_key
from llmgw.auth.principal import Principal
from llmgw.batch.batch_objects import owner_of
from llmgw.errors import ApiError, AuthUnavailable, BadRequest, StoreError
from llmgw.http.responses import JSON, api_error_response
from llmgw.http.rsgi import HTTPProtocol, Scope

MAX_JSON_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Caller:
    principal: Principal
    owner: str
    key_hash: str


async def caller(gate: AuthGate, scope: Scope, clock: Callable[[], float] = time.time) -> Caller:
    """The caller behind the request's key (401 without a valid one)."""
    header, now = scope.headers.get("authorization"), clock()
    principal = gate.known(header, now) or await gate.authenticate(header, now)
    token = bearer_token(header)
    assert token is not None  # authenticated
    return Caller(
        principal, owner_of(principal.kind, principal.project_id, principal.user_id), hash_key(token)
    )


def answer(proto: HTTPProtocol, body: object, status: int = 200) -> None:
    proto.response_bytes(status, [("content-type", JSON)], orjson.dumps(body))


async def guarded(proto: HTTPProtocol, handler: Awaitable[None]) -> None:
    """Runs a route, answering a refusal (or a store that cannot answer) in OpenAI's shape."""
    try:
        await handler
    except ApiError as error:
        status, headers, body = api_error_response(error)
        proto.response_bytes(status, headers, body)
    except StoreError:
        unavailable = AuthUnavailable(
            "the gateway's store cannot be reached; try again shortly", retry_after=5
        )
        status, headers, body = api_error_response(unavailable)
        proto.response_bytes(status, headers, body)


def query(scope: Scope) -> dict[str, str]:
    return {k: v[-1] for k, v in urllib.parse.parse_qs(scope.query_string).items()}


def limit_of(values: dict[str, str], default: int, most: int) -> int:
    raw = values.get("limit")
    if raw is None:
        return default
    if not raw.isdigit() or not 1 <= int(raw) <= most:
        raise BadRequest(f"limit {raw!r} must be a whole number from 1 to {most}", param="limit")
    return int(raw)


async def json_body(proto: HTTPProtocol) -> dict[str, object]:
    raw = b""
    async for part in proto:
        raw += part
        if len(raw) > MAX_JSON_BYTES:
            raise BadRequest("the request body is too large for this route", code="body_too_large")
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"the request body is not JSON: {exc}", code="invalid_json") from exc
    if not isinstance(value, dict):
        raise BadRequest("the request body must be a JSON object", code="invalid_json")
    return value
