"""`ScimApp`: SCIM 2.0 at /scim/v2 on the client port, for an identity provider to
provision people and groups (RFC 7644). An RSGI application the server mounts.

Every request needs `Authorization: Bearer <token>`, the token of
`auth.scim.token_file`, compared in constant time. Every answer is
`application/scim+json`; every refusal is in SCIM's error shape, and is logged with
the method, path and reason (never the token).

    GET                     /ServiceProviderConfig  /ResourceTypes[/<name>]  /Schemas[/<urn>]
    GET|POST                /Users   /Groups        (?filter=… &startIndex= &count=)
    GET|PUT|PATCH|DELETE    /Users/<id>  /Groups/<id>   (If-Match: W/"<version>")
"""

from __future__ import annotations

import hmac
import logging
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

import orjson

from llmgw.errors import StoreMissing, StoreStale, StoreUnavailable
from llmgw.http.rsgi import HTTPProtocol, Scope
from llmgw.identity.scim import discovery
from llmgw.identity.scim.errors import CONTENT_TYPE, ScimError, error_body
from llmgw.identity.scim.groups import GroupsRoutes
from llmgw.identity.scim.request import Request
from llmgw.identity.scim.users import PersonChanged, UsersRoutes
from llmgw.store.provisioning import ProvisioningRepo
from llmgw.store.rows import Scope as PersonRow

log = logging.getLogger(__name__)

PREFIX = "/scim/v2"
MAX_BODY_BYTES = 4 * 1024 * 1024
"""The largest body taken: a group of tens of thousands of members fits."""
_WITH_BODY = frozenset({"POST", "PUT", "PATCH"})


async def _nothing(_user_id: str, _known: PersonRow | None) -> None:
    return None


class ScimApp:
    """The /scim/v2 routes over the store's people and groups."""

    def __init__(
        self,
        people: ProvisioningRepo,
        token: str,
        *,
        clock: Callable[[], float] = time.time,
        on_person: PersonChanged = _nothing,
    ) -> None:
        """`on_person` is told of a person whose standing changed (made, made inactive,
        deprovisioned), so this gateway honours or refuses their keys at once."""
        self._token = token.encode()
        self._users = UsersRoutes(people, clock, on_person)
        self._groups = GroupsRoutes(people, clock)

    async def __call__(self, scope: Scope, proto: HTTPProtocol) -> None:
        if scope.proto != "http":
            return
        try:
            if not self._authorized(scope.headers.get("authorization")):
                raise ScimError(
                    401, "SCIM needs 'Authorization: Bearer <token>' with the token of auth.scim.token_file"
                )
            body = await _body(proto) if scope.method in _WITH_BODY else b""
            request = Request(
                method=scope.method,
                parts=tuple(part for part in scope.path[len(PREFIX) :].split("/") if part),
                query=dict(parse_qsl(scope.query_string, keep_blank_values=True)),
                body=body,
                if_match=scope.headers.get("if-match"),
                base_url=_base_url(scope),
            )
            status, payload, headers = await self.handle(request)
        except ScimError as error:
            log.warning(
                "SCIM %s %s refused with %d: %s", scope.method, scope.path, error.status, error.detail
            )
            headers = [("content-type", CONTENT_TYPE)]
            if error.status == 401:
                headers.append(("www-authenticate", 'Bearer realm="scim"'))
            proto.response_bytes(
                error.status, headers, error_body(error.status, error.detail, error.scim_type)
            )
            return
        except Exception:  # a bug here must still answer in SCIM's shape, and be logged
            log.exception("SCIM %s %s failed", scope.method, scope.path)
            detail = "the SCIM service failed on this request; the server log says why"
            proto.response_bytes(500, [("content-type", CONTENT_TYPE)], error_body(500, detail))
            return
        answer = b"" if payload is None else orjson.dumps(payload)
        proto.response_bytes(status, [("content-type", CONTENT_TYPE), *headers], answer)

    def _authorized(self, header: str | None) -> bool:
        if header is None:
            return False
        scheme, _, given = header.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), self._token)

    async def handle(self, request: Request) -> tuple[int, Any, list[tuple[str, str]]]:
        """One request past the token: status, JSON payload (None: no body), headers."""
        head = request.parts[0] if request.parts else ""
        try:
            if head == "Users":
                return await self._users.handle(request)
            if head == "Groups":
                return await self._groups.handle(request)
            return _discovery(request)
        except StoreMissing as exc:
            raise ScimError(404, f"{exc}: it was never provisioned, or was deleted") from None
        except StoreStale as exc:
            raise ScimError(412, f"{exc}: read it again") from None
        except StoreUnavailable as exc:
            log.warning("SCIM: store unavailable: %s", exc)
            raise ScimError(503, "the store cannot be reached; try again shortly") from None


def _discovery(request: Request) -> tuple[int, Any, list[tuple[str, str]]]:
    if request.method != "GET":
        raise ScimError(405, f"{request.method} is not served here: discovery is read with GET")
    head, rest, base = request.parts[0] if request.parts else "", request.parts[1:], request.base_url
    found: list[dict[str, Any]]
    if head == "ServiceProviderConfig" and not rest:
        return 200, discovery.service_provider_config(base), []
    if head == "ResourceTypes":
        found = discovery.resource_types(base)
    elif head == "Schemas":
        found = discovery.schemas(base)
    else:
        raise ScimError(
            404, f"{PREFIX}/{'/'.join(request.parts)} is not a SCIM endpoint: see {PREFIX}/ResourceTypes"
        )
    if not rest:
        return 200, discovery.list_response(found, len(found), 1), []
    for item in found:
        if item["id"] == rest[0]:
            return 200, item, []
    raise ScimError(404, f"{head}/{rest[0]} does not exist")


async def _body(proto: HTTPProtocol) -> bytes:
    pieces: list[bytes] = []
    size = 0
    async for piece in proto:
        size += len(piece)
        if size > MAX_BODY_BYTES:
            raise ScimError(
                413, f"the body is over {MAX_BODY_BYTES} bytes: send fewer members at a time", "tooMany"
            )
        pieces.append(piece)
    return b"".join(pieces)


def _base_url(scope: Scope) -> str:
    host = scope.headers.get("host") or "localhost"
    # Only the URL printed back in meta.location follows the header: nothing is routed by it.
    scheme = "https" if (scope.headers.get("x-forwarded-proto") or "").lower() == "https" else "http"
    return f"{scheme}://{host}{PREFIX}"
