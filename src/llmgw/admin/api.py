"""The admin API under `/api`: tenancy, keys, limits, budgets and usage as JSON, behind
the admin token. An RSGI application the gateway mounts on `admin_listen`.

    GET|POST          /api/orgs | teams | projects | users      (?org= ?team= filter)
    GET|PATCH|DELETE  /api/<kind>/<id>
    POST              /api/users/<id>/approve | reject   a signup let in or turned away
    GET               /api/teams/<id>/members   who is in a team, and what put them there
                                                (manual, oidc or scim: a team's idp_group)
    GET|POST          /api/memberships          DELETE /api/memberships/<user>/<project>
    GET|POST          /api/keys                 GET|DELETE /api/keys/<id> (DELETE revokes)
    PUT               /api/keys/<id>/limits     {rpm, tpm}
    GET               /api/limits               PUT /api/limits/<kind>/<id>   {rpm, tpm}
    GET               /api/budgets              PUT /api/budgets/<kind>/<id>  {budget, period}
    PUT               /api/ttl/<kind>/<id>      {max_key_ttl}
    GET               /api/usage?by=project|team|org|user|key|model&since=24h
    GET               /api/usage/records?limit=100&key=<id>&since=1h
    *                 /api/control/...          the control plane's routes (llmgw.admin.control_routes)
    GET               /api/settings/inert       settings in use that this version does not act
                                                on (llmgw.config.inert), one per path
    *                 /api/control/...          the control plane's routes (llmgw.admin.control_routes)
    GET               /api/router/replicas      the gateway's routing state (llmgw.router.admin_routes)
    GET               /api/notify/deliveries    the webhook delivery log (llmgw.notify.routes);
    POST              /api/notify/test/<name>   a test event sent to one webhook now
    GET               /api/history              the dashboard's charts over monitoring.window, read
                                                from monitoring.prometheus (llmgw.obs.history); an
                                                answer saying why when there is none

Lists answer `{"data": [...]}`; refusals use OpenAI's error envelope with the status
chosen by the error's type, as on the client port.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

import orjson
from pydantic import ValidationError

from llmgw.admin import token as admin_token
from llmgw.admin.handlers import Handlers, Query
from llmgw.auth.gate import AuthGate
from llmgw.config import Settings
from llmgw.config.inert import InertSetting, inert_in_use
from llmgw.errors import (
    ApiError,
    AuthUnavailable,
    BadRequest,
    Conflict,
    MethodNotAllowed,
    NotFound,
    StoreConflict,
    StoreMissing,
    StoreUnavailable,
    Unauthorized,
)
from llmgw.http.responses import JSON, api_error_response, error_body
from llmgw.http.rsgi import HTTPProtocol, Scope
from llmgw.obs.history import HistoryReader
from llmgw.store import Store

if TYPE_CHECKING:
    from llmgw.admin.control_routes import ControlRoutes
    from llmgw.guard.attachments import GuardRoutes
    from llmgw.notify.routes import NotifyRoutes
    from llmgw.router.admin_routes import RouterRoutes

log = logging.getLogger(__name__)

PREFIX = "/api"
_WITH_BODY = frozenset({"POST", "PUT", "PATCH"})


class AdminApi:
    """The `/api` routes; every request needs `Authorization: Bearer <admin token>`."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        token: str,
        gate: AuthGate | None = None,
        clock: Callable[[], float] = time.time,
        control: ControlRoutes | None = None,
    ) -> None:
        self._token = token
        self._handlers = Handlers(settings, store, gate, clock)
        self.control = control
        self.inert: Callable[[], list[InertSetting]] = lambda: inert_in_use(settings)
        """The inert settings in use; the server points it at the catalog in force."""
        self.router: RouterRoutes | None = None
        self.guard: GuardRoutes | None = None
        """`/api/guard`, set by the server once the gateway's guardrails exist."""
        self.notify: NotifyRoutes | None = None
        """`/api/notify`, set by the server where it runs the webhook outbox."""
        self.history = HistoryReader(settings.monitoring, clock)

    async def __call__(self, scope: Scope, proto: HTTPProtocol) -> None:
        if scope.proto != "http":
            return
        try:
            if not admin_token.matches(self._token, scope.headers.get("authorization")):
                raise Unauthorized(
                    "the admin API needs 'Authorization: Bearer <admin token>' (the token is in "
                    "admin_token_file)",
                    code="invalid_admin_token",
                )
            body = await proto() if scope.method in _WITH_BODY else b""
            query = {name: values[-1] for name, values in parse_qs(scope.query_string).items()}
            status, payload = await self.handle(scope.method, scope.path, query, body)
            proto.response_bytes(status, [("content-type", JSON)], orjson.dumps(payload))
        except ApiError as error:
            status, headers, answer = api_error_response(error)
            proto.response_bytes(status, headers, answer)
        except Exception:  # a bug here must still answer in the API's shape, and be logged
            log.exception("admin API: %s %s failed", scope.method, scope.path)
            body = error_body("the admin API failed on this request; the server log says why", "server_error")
            proto.response_bytes(500, [("content-type", JSON)], body)

    async def handle(self, method: str, path: str, query: Query, body: bytes) -> tuple[int, Any]:
        """One request, past the token check: status and JSON payload, or an ApiError."""
        rest = path[len(PREFIX) :] if path.startswith(PREFIX + "/") or path == PREFIX else path
        parts = [part for part in rest.split("/") if part]
        if parts and parts[0] == "control":
            # Its own routes and errors; its bodies may be YAML, so they pass through raw.
            if self.control is None:
                raise NotFound(
                    "this server runs no control plane, so /api/control is not here", code="unknown_route"
                )
            return await self.control.handle(method, parts[1:], query, body)
        if parts == ["settings", "inert"]:
            if method != "GET":
                raise MethodNotAllowed(f"{method} {path} is not served; use GET")
            return 200, {"data": [found.as_json() for found in self.inert()]}
        if parts == ["history"]:
            if method != "GET":
                raise MethodNotAllowed(f"{method} {path} is not served; use GET", allow="GET")
            return 200, (await self.history.read()).as_json()
        if parts and parts[0] == "notify" and self.notify is not None:
            return await self.notify.handle(method, parts[1:], query, body)
        if parts and parts[0] == "router" and self.router is not None:
            return await self.router.handle(method, parts[1:], query, body)
        try:
            data = orjson.loads(body) if body else {}
        except orjson.JSONDecodeError as exc:
            raise BadRequest(f"the body is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise BadRequest("the body must be a JSON object")
        try:
            if parts and parts[0] == "guard" and self.guard is not None:
                return await self.guard.handle(method, parts[1:], query, data)
            return await self._handlers.dispatch(method, parts, query, data)
        except ValidationError as exc:
            first = exc.errors()[0]["loc"] if exc.error_count() else ()
            raise BadRequest(_validation_message(exc), param=".".join(map(str, first)) or None) from None
        except StoreMissing as exc:
            raise NotFound(str(exc), code="not_found") from None
        except StoreConflict as exc:
            raise Conflict(
                f"that conflicts with what is stored ({exc}): the name may be taken, the parent may "
                "not exist, or other rows still refer to it",
                code="conflict",
            ) from None
        except StoreUnavailable as exc:
            log.warning("admin API: store unavailable: %s", exc)
            raise AuthUnavailable("the store cannot be reached; try again shortly", retry_after=5) from None


def _validation_message(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"]) or "body"
        problems.append(f"{where}: {error['msg']}")
    return "; ".join(problems)
