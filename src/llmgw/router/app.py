"""The client-facing OpenAI API, as an RSGI-shaped application (llmgw.router.rsgi)
served by llmgw's own HTTP/1.1 server (llmgw.server.http1: httptools on uvloop).

Why that server: the application is called once per request with the body ready, on
the loop the rest of the gateway runs on, with nothing between the socket and it but
the llhttp parser. granian, which served it first, did its HTTP work in Rust but
handed each request to Python and back across threads, and that hand-off alone cost
about 125 µs per request on this project's machine, more than the gateway's own work
(~100 µs); aiohttp's server and uvicorn cost more than twice granian's
(bench/results/router-client-choice.md). Measured A/B in one run
(bench/results/router-overhead-2026-11-29-5.md): the latency the gateway adds at
concurrency 1 went from 0.54 ms to 0.30 ms (p50, non-streaming), and its CPU per
request at concurrency 64 from 395 to 344 µs. The routes are few and fixed, so a
dictionary dispatches them.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import orjson

from llmgw.auth.tags import parse_tags
from llmgw.errors import ApiError, BadRequest, MethodNotAllowed, NotFound, PayloadTooLarge
from llmgw.guard import FLAG_TAG, Hit, flag_tag
from llmgw.router.catalog_view import ModelsView
from llmgw.router.departures import Departures
from llmgw.router.dispatch import Dispatcher
from llmgw.router.endpoints import EndpointRegistry
from llmgw.router.flow import FlowControl
from llmgw.router.request import ClientRequest, Kind, parse_request
from llmgw.router.responses import JSON, api_error_response
from llmgw.router.rsgi import HTTPProtocol, Scope
from llmgw.router.targets import Target, TargetResolver, check_limits, unknown_model
from llmgw.router.usage import NO_TAGS, Account, new_account

if TYPE_CHECKING:
    from llmgw.auth.gate import AuthGate
    from llmgw.auth.principal import Principal
    from llmgw.guard import Guardrails

_GENERATION_ROUTES: dict[str, Kind] = {
    "/v1/chat/completions": Kind.CHAT,
    "/v1/completions": Kind.COMPLETIONS,
    "/v1/embeddings": Kind.EMBEDDINGS,
}
_MAX_REQUEST_ID = 128
_TAGS_HEADER = "x-llmgw-tags"


class GatewayApp:
    """The OpenAI routes: generation (chat, completions, embeddings) and model listing."""

    def __init__(
        self,
        resolver: TargetResolver,
        endpoints: EndpointRegistry,
        dispatcher: Dispatcher,
        models: ModelsView,
        max_body_bytes: int,
        session_header: str,
        departures: Departures,
        flow: FlowControl,
        band_header: str,
        trust_band_header: bool,
        auth: AuthGate | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        guard: Guardrails | None = None,
    ) -> None:
        self._resolver = resolver
        self._endpoints = endpoints
        self._dispatcher = dispatcher
        self._models = models
        self._max_body_bytes = max_body_bytes
        self._session_header = session_header.lower()
        self._departures = departures
        self._flow = flow
        self._band_header = band_header.lower()
        self._trust_band_header = trust_band_header and auth is None
        self._auth = auth
        self._guard = guard
        self._clock = clock
        self._wall_clock = wall_clock
        self._id_prefix = os.urandom(4).hex()
        self._ids = itertools.count(1)

    async def __call__(self, scope: Scope, proto: HTTPProtocol) -> None:
        if scope.proto != "http":
            return
        path = scope.path
        try:
            kind = _GENERATION_ROUTES.get(path)
            if kind is not None:
                if scope.method != "POST":
                    raise MethodNotAllowed(f"{path} takes POST")
                await self._generate(scope, proto, kind)
            elif path == "/v1/models" or path.startswith("/v1/models/"):
                if scope.method != "GET":
                    raise MethodNotAllowed(f"{path} takes GET")
                principal = await self._authenticate(scope)
                self._list_models(proto, path, principal)
            elif path in ("/", "/health", "/healthz"):
                proto.response_bytes(
                    200, [("content-type", "text/plain")], b"llmgw: the OpenAI API is under /v1\n"
                )
            else:
                raise NotFound(
                    f"{scope.method} {path} is not an API route: the API is under /v1", code="unknown_route"
                )
        except ApiError as error:
            status, headers, body = api_error_response(error)
            proto.response_bytes(status, headers, body)

    async def _authenticate(self, scope: Scope) -> Principal | None:
        """The caller, with auth on (401 without a valid key); None with auth off."""
        auth = self._auth
        if auth is None:
            return None
        header, now = scope.headers.get("authorization"), self._wall_clock()
        return auth.known(header, now) or await auth.authenticate(header, now)

    def _visible(self, principal: Principal | None, target: Target) -> bool:
        if principal is None or (principal.sees_every_model and not target.owner):
            return True  # auth off, or the usual caller: asked on every request
        return self._auth is None or self._auth.visible(principal, target.model, target.owner)

    def _request_id(self, scope: Scope) -> str:
        given = scope.headers.get("x-request-id")
        if given and len(given) <= _MAX_REQUEST_ID and given.isprintable():
            return str(given)
        return f"{self._id_prefix}-{next(self._ids)}"

    async def _read_body(self, scope: Scope, proto: HTTPProtocol) -> bytes:
        limit = self._max_body_bytes
        declared = scope.headers.get("content-length")
        if declared is not None:
            if not declared.isdigit():
                raise BadRequest("content-length is not a number")
            if int(declared) > limit:
                raise PayloadTooLarge(
                    f"the request body is {declared} bytes; this gateway takes at most {limit} "
                    "(router.max_body_bytes)",
                    code="body_too_large",
                )
            return await proto()
        parts: list[bytes] = []
        size = 0
        async for part in proto:
            size += len(part)
            if size > limit:
                raise PayloadTooLarge(
                    f"the request body is over {limit} bytes (router.max_body_bytes)", code="body_too_large"
                )
            parts.append(part)
        return b"".join(parts)

    async def _generate(self, scope: Scope, proto: HTTPProtocol, kind: Kind) -> None:
        started = self._clock()
        # `_authenticate` without its coroutine where it would await nothing (auth off,
        # or a key used before): the usual request pays a dictionary lookup only.
        auth = self._auth
        principal = (
            None
            if auth is None
            else auth.known(scope.headers.get("authorization"), self._wall_clock())
            or await self._authenticate(scope)
        )
        raw = await self._read_body(scope, proto)
        request = parse_request(kind, raw)
        session = scope.headers.get(self._session_header)
        if session:
            request.session = str(session)
        routable = bool(self._endpoints.for_model(request.model))
        target = self._resolver.resolve(request.model, routable=routable)
        if not self._visible(principal, target):
            # Not allowed to this caller is answered as not existing at all.
            raise unknown_model(request.model)
        check_limits(request, target)
        guard = self._guard
        if guard is not None and guard.active:
            request = await self._guard_input(guard, kind, request, principal)
        chain: list[Target] = [target]
        for name in target.fallbacks:
            fallback = self._resolver.fallback(name)
            if fallback is not None and self._visible(principal, fallback):
                chain.append(fallback)
        if principal is not None:
            request.account = self._charge(principal, request, target, scope)
            if request.guard_flagged:
                tags = {**request.account.tags, FLAG_TAG: request.guard_flagged}
                request.account = request.account._replace(tags=tags)
            band = self._flow.band(principal.band)
        else:
            band = self._flow.band(scope.headers.get(self._band_header) if self._trust_band_header else None)
        task = asyncio.current_task()
        assert task is not None
        stay = self._departures.enter(proto, task, asyncio.get_running_loop().time())
        try:
            if not self._flow.admit_now(target.model, band):
                self._departures.watch_now(stay)
                queued_at = self._clock()
                await self._flow.wait(target.model, band)
                if request.account is not None:
                    request.account = request.account._replace(queued_s=self._clock() - queued_at)
            self._flow.dispatched(target.model, band)
            request.engine_priority = self._flow.engine_priority(band)
            try:
                await self._dispatcher.serve(proto, request, chain, self._request_id(scope), started)
            finally:
                self._flow.finished(target.model, band)
        except asyncio.CancelledError:
            if not stay.gone:
                raise
            # The client left; the replica's connection was closed on the way out.
        finally:
            self._departures.leave(stay)

    async def _guard_input(
        self, guard: Guardrails, kind: Kind, request: ClientRequest, principal: Principal | None
    ) -> ClientRequest:
        """The input stage (400 content_filter on a block); a redacted request is
        decoded again from its rewritten body, so the engine, the prefix tree and the
        token estimate all see the redacted text."""
        scopes: tuple[tuple[str, str], ...] = ()
        if principal is not None and guard.policies.attachments:
            scopes = tuple(
                (level, ident)
                for level, ident in (
                    ("user", principal.user_id),
                    ("project", principal.project_id),
                    ("team", principal.team_id),
                    ("org", principal.org_id),
                )
                if ident
            )
        applied = guard.applied(scopes)
        flags: list[Hit] = []
        if await guard.check_request(kind, request.body, applied, flags):
            redacted = parse_request(kind, orjson.dumps(request.body))
            redacted.session = request.session
            request = redacted
        request.guard = applied
        if flags:
            request.guard_flagged = flag_tag(flags)
        return request

    def _charge(self, principal: Principal, request: ClientRequest, target: Target, scope: Scope) -> Account:
        """Counts the request against the caller's limits and budgets (429 when one is
        reached). Tokens are charged at the prompt's floor plus the output asked for, as
        OpenAI counts them; the real count replaces it when the answer's usage is read."""
        assert self._auth is not None
        estimate = request.prompt_token_floor + (request.max_tokens or 0)
        counted = self._auth.admit(principal, estimate, self._wall_clock())
        header, metadata = scope.headers.get(_TAGS_HEADER), request.body.get("metadata")
        if not header and not metadata:
            return new_account((principal, counted, NO_TAGS, 0.0))
        tags = parse_tags(header, metadata if isinstance(metadata, dict) else None)
        return new_account((principal, counted, tags, 0.0))

    def _list_models(self, proto: HTTPProtocol, path: str, principal: Principal | None) -> None:
        allowed = None if principal is None or self._auth is None else self._allowed(principal)
        if path == "/v1/models":
            body = orjson.dumps({"object": "list", "data": self._models.list(allowed)})
        else:
            name = path[len("/v1/models/") :]
            entry = self._models.get(name, allowed)
            if entry is None:
                raise unknown_model(name)
            body = orjson.dumps(entry)
        proto.response_bytes(200, [("content-type", JSON)], body)

    def _allowed(self, principal: Principal) -> Callable[[str], bool]:
        gate = self._auth
        assert gate is not None
        return lambda model: gate.visible(principal, model, None)
