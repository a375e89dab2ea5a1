"""The admin API under `/api`: tenancy, keys, limits, budgets and usage as JSON, behind
the admin token. An RSGI application the gateway mounts on `admin_listen`.

    GET|POST          /api/orgs | teams | projects | users      (?org= ?team= filter)
    GET|PATCH|DELETE  /api/<kind>/<id>
    POST              /api/users/<id>/approve | reject   a signup let in or turned away
    GET               /api/teams/<id>/members   who is in a team, and what put them there
                                                (manual, oidc or scim: a team's idp_group)
    GET|POST          /api/memberships          DELETE /api/memberships/<user>/<project>
    GET|POST          /api/keys                 GET|DELETE /api/keys/<id> (DELETE revokes)
                                                (?newest=N: the N newest and `total`, the count)
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
    GET               /api/router/canaries[/<model>]   canary splits, figures and rollbacks;
    POST              /api/router/canaries/<model>/reset   a rolled-back candidate back in
    GET               /api/eval[/<model>]       the last evaluation results (llmgw.batch.eval_routes)
    POST              /api/eval/<model>         runs an evaluation suite against the model now
    GET               /api/notify/deliveries    the webhook delivery log (llmgw.notify.routes);
    POST              /api/notify/test/<name>   a test event sent to one webhook now
    GET               /api/history              the dashboard's charts over monitoring.window, read
                                                from monitoring.prometheus (llmgw.obs.history); an
                                                answer saying why when there is none

    PUT|DELETE        /api/users/<id>/roles/<org|team|project>/<id>   {role: admin|member}

Lists answer `{"data": [...]}`; refusals use OpenAI's error envelope with the status
chosen by the error's type, as on the client port.

Two doors, one API. On `admin_listen` it takes the admin token and nothing else: the
operator, who may do everything. Built with `sessions` (the server mounts that one on
the client port, which people's browsers reach) it takes a browser session and nothing
else, so the all-powerful token never travels over the public port: 401 without a
session, 403 for a person whose signup waits, 403 `bad_csrf_token` for a request that
changes something without `x-csrf-token` equal to the session's token (/auth/me shows
it), and every request checked against the person's roles (`llmgw.admin.access`).
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

import orjson
from pydantic import ValidationError

from llmgw.admin import token as admin_token
from llmgw.admin.access import Access
from llmgw.admin.handlers import Handlers, Query
from llmgw.auth.gate import AuthGate
from llmgw.config import Settings
from llmgw.config.inert import InertSetting, inert_in_use
from llmgw.errors import (
    ApiError,
    AuthUnavailable,
    BadRequest,
    Conflict,
    Forbidden,
    MethodNotAllowed,
    NotFound,
    StoreConflict,
    StoreMissing,
    StoreUnavailable,
    Unauthorized,
)
from llmgw.http.responses import JSON, api_error_response, error_body
from llmgw.http.rsgi import HTTPProtocol, Scope
from llmgw.identity.roles import OPERATOR, Actor
from llmgw.identity.sessions import SessionManager
from llmgw.obs.history import HistoryReader
from llmgw.store import Store

if TYPE_CHECKING:
    from llmgw.admin.control_routes import ControlRoutes
    from llmgw.batch.eval_routes import EvalRoutes
    from llmgw.guard.attachments import GuardRoutes
    from llmgw.notify.routes import NotifyRoutes
    from llmgw.router.admin_routes import RouterRoutes

log = logging.getLogger(__name__)

PREFIX = "/api"
_WITH_BODY = frozenset({"POST", "PUT", "PATCH"})
_SAFE = frozenset({"GET", "HEAD", "OPTIONS"})
_NO_STORE = ("cache-control", "no-store")


class AdminApi:
    """The `/api` routes; every request needs `Authorization: Bearer <admin token>`, or,
    built with `sessions` instead, a signed-in person's session."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        token: str | None,
        gate: AuthGate | None = None,
        clock: Callable[[], float] = time.time,
        control: ControlRoutes | None = None,
        *,
        sessions: SessionManager | None = None,
    ) -> None:
        if (token is None) == (sessions is None):
            raise ValueError("the admin API takes either the admin token or sessions")
        self._token = token
        self._sessions = sessions
        self._access = Access(store)
        self._handlers = Handlers(settings, store, gate, clock)
        self.control = control
        self.inert: Callable[[], list[InertSetting]] = lambda: inert_in_use(settings)
        """The inert settings in use; the server points it at the catalog in force."""
        self.router: RouterRoutes | None = None
        self.evals: EvalRoutes | None = None
        """`/api/eval`, set by the server once the gateway exists."""
        self.guard: GuardRoutes | None = None
        """`/api/guard`, set by the server once the gateway's guardrails exist."""
        self.notify: NotifyRoutes | None = None
        """`/api/notify`, set by the server where it runs the webhook outbox."""
        self.history = HistoryReader(settings.monitoring, clock)

    async def __call__(self, scope: Scope, proto: HTTPProtocol) -> None:
        if scope.proto != "http":
            return
        try:
            actor = await self._actor(scope)
            body = await proto() if scope.method in _WITH_BODY else b""
            query = {name: values[-1] for name, values in parse_qs(scope.query_string).items()}
            status, payload = await self.handle(scope.method, scope.path, query, body, actor=actor)
            headers = [("content-type", JSON)]
            if not actor.operator:
                headers.append(_NO_STORE)  # a person's answers may hold a new key
            proto.response_bytes(status, headers, orjson.dumps(payload))
        except ApiError as error:
            status, headers, answer = api_error_response(error)
            proto.response_bytes(status, headers, answer)
        except Exception:  # a bug here must still answer in the API's shape, and be logged
            log.exception("admin API: %s %s failed", scope.method, scope.path)
            body = error_body("the admin API failed on this request; the server log says why", "server_error")
            proto.response_bytes(500, [("content-type", JSON)], body)

    async def key_projects(self, actor: Actor) -> list[str]:
        """The projects whose keys `actor` may make and revoke (for the account page)."""
        return await self._access.key_projects(actor)

    async def _actor(self, scope: Scope) -> Actor:
        """Who the request comes from, or the refusal: the operator by the admin token, or
        a signed-in person by their session (with the CSRF token on what changes)."""
        if self._sessions is None:
            if self._token is None or not admin_token.matches(
                self._token, scope.headers.get("authorization")
            ):
                raise Unauthorized(
                    "the admin API needs 'Authorization: Bearer <admin token>' (the token is in "
                    "admin_token_file)",
                    code="invalid_admin_token",
                )
            return OPERATOR
        who = await self._sessions.signed_in(scope.headers)
        if who is None:
            raise Unauthorized(
                "nobody is signed in: sign in at /auth/login (the admin token is taken on admin_listen only)",
                code="not_signed_in",
            )
        if not who.active:
            raise Forbidden("your account waits for an administrator's approval", code="pending_approval")
        if scope.method not in _SAFE:
            sent = scope.headers.get("x-csrf-token") or ""
            if not sent or not secrets.compare_digest(sent.encode(), who.csrf_token.encode()):
                raise Forbidden(
                    "a request that changes something needs the x-csrf-token header equal to your "
                    "session's csrf_token (GET /auth/me shows it)",
                    code="bad_csrf_token",
                )
        return Actor(who.user_id, who.roles)

    async def handle(
        self, method: str, path: str, query: Query, body: bytes, *, actor: Actor = OPERATOR
    ) -> tuple[int, Any]:
        """One request, past the token or session check: status and JSON payload, or an
        ApiError; a person's request is checked against their roles first, and its lists
        cut down to what they may see."""
        rest = path[len(PREFIX) :] if path.startswith(PREFIX + "/") or path == PREFIX else path
        parts = [part for part in rest.split("/") if part]
        if not actor.operator:
            data = _json_object(body)
            try:
                await self._access.check(actor, method, parts, query, data)
                status, payload = await self._routes(method, parts, query, body)
            except ValidationError as exc:
                raise _bad_body(exc) from None
            except StoreMissing as exc:
                raise NotFound(str(exc), code="not_found") from None
            except StoreUnavailable as exc:
                log.warning("admin API: store unavailable: %s", exc)
                raise AuthUnavailable(
                    "the store cannot be reached; try again shortly", retry_after=5
                ) from None
            return status, await self._access.visible(actor, parts, payload)
        return await self._routes(method, parts, query, body)

    async def _routes(self, method: str, parts: list[str], query: Query, body: bytes) -> tuple[int, Any]:
        path = "/".join([PREFIX, *parts])
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
        if parts and parts[0] == "eval" and self.evals is not None:
            return await self.evals.handle(method, parts[1:], query, body)
        data = _json_object(body)
        try:
            if parts and parts[0] == "guard" and self.guard is not None:
                return await self.guard.handle(method, parts[1:], query, data)
            return await self._handlers.dispatch(method, parts, query, data)
        except ValidationError as exc:
            raise _bad_body(exc) from None
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


def _json_object(body: bytes) -> dict[str, Any]:
    try:
        data = orjson.loads(body) if body else {}
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"the body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BadRequest("the body must be a JSON object")
    return data


def _bad_body(exc: ValidationError) -> BadRequest:
    first = exc.errors()[0]["loc"] if exc.error_count() else ()
    return BadRequest(_validation_message(exc), param=".".join(map(str, first)) or None)


def _validation_message(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"]) or "body"
        problems.append(f"{where}: {error['msg']}")
    return "; ".join(problems)
