"""The client-facing OpenAI API, as an RSGI-shaped application (llmgw.http.rsgi)
served by llmgw's own HTTP/1.1 server (llmgw.http.http1: httptools on uvloop).

Why that server: the application is called once per request with the body ready, on
the loop the rest of the gateway runs on, with nothing between the socket and it but
the llhttp parser. granian, which served it first, did its HTTP work in Rust but
handed each request to Python and back across threads, and that hand-off alone cost
about 125 µs per request on this project's machine, more than the gateway's own work
(~100 µs); aiohttp's server and uvicorn cost more than twice granian's (measured when
granian was replaced; that record was not kept, unlike the client's:
bench/results/router-client-choice.md). Measured A/B in one run
(bench/results/router-overhead-2026-11-29-5.md): the latency the gateway adds at
concurrency 1 went from 0.54 ms to 0.30 ms (p50, non-streaming), and its CPU per
request at concurrency 64 from 395 to 344 µs. The routes are few and fixed, so a
dictionary dispatches them.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import orjson

from llmgw.auth.tags import parse_tags
from llmgw.core.request_context import REQUEST_ID
from llmgw.errors import ApiError, BadRequest, Forbidden, MethodNotAllowed, NotFound, PayloadTooLarge
from llmgw.guard import FLAG_TAG, Hit, flag_tag
from llmgw.http.responses import JSON, api_error_response, refusal_reason
from llmgw.http.rsgi import App, HTTPProtocol, Scope
from llmgw.obs.access import AccessLine
from llmgw.obs.logs import current_trace_id
from llmgw.router.cache_key import cache_key, cacheable
from llmgw.router.catalog_view import ModelsView
from llmgw.router.cors import CorsPolicy, WithHeaders
from llmgw.router.counted import CountedProtocol
from llmgw.router.departures import Departures
from llmgw.router.dispatch import CACHE_TAG, Dispatcher
from llmgw.router.endpoints import EndpointRegistry
from llmgw.router.flow import FlowControl
from llmgw.router.metrics import MODEL_ROUTE, OTHER_ROUTE, GatewayMetrics
from llmgw.router.request import ClientRequest, Kind, parse_request
from llmgw.router.targets import Target, TargetResolver, check_limits, unknown_model
from llmgw.router.traced import OPERATIONS, StatusSeen
from llmgw.router.usage import NO_TAGS, Account, new_account

if TYPE_CHECKING:
    from llmgw.auth.gate import AuthGate
    from llmgw.auth.principal import Principal
    from llmgw.guard import Guardrails
    from llmgw.obs.spans import RequestTrace, Spans
    from llmgw.router.access_log import AccessRecorder
    from llmgw.router.canary import Canaries
    from llmgw.router.response_cache import ResponseCache

_GENERATION_ROUTES: dict[str, Kind] = {
    "/v1/chat/completions": Kind.CHAT,
    "/v1/completions": Kind.COMPLETIONS,
    "/v1/embeddings": Kind.EMBEDDINGS,
}
_TAGS_HEADER = "x-llmgw-tags"
# A client's x-request-id is kept when it is a sane one (what request ids are made of:
# UUIDs, ULIDs, hex, dotted or prefixed forms), so its logs and the gateway's join up;
# anything else is replaced by one minted here, never echoed: it ends up in the answer,
# the replica's request and the usage records.
_CLIENT_REQUEST_ID = re.compile(r"[A-Za-z0-9._:/+=@-]{1,128}")


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
        metrics: GatewayMetrics,
        auth: AuthGate | None = None,
        cors: CorsPolicy | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        guard: Guardrails | None = None,
        mounts: Sequence[tuple[str, App]] = (),
        access: AccessRecorder | None = None,
        spans: Spans | None = None,
        canaries: Canaries | None = None,
        cache: ResponseCache | None = None,
    ) -> None:
        self._cache = cache
        self._resolver = resolver
        self._canaries = canaries
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
        self._metrics = metrics
        self._cors = cors
        self._guard = guard
        # The longest prefix first, so a mount under another's prefix is reached.
        self._mounts = tuple(sorted(mounts, key=lambda mount: -len(mount[0])))
        # A page at "/" (llmgw.web's landing page) replaces the line of text there.
        self._root_mounted = any(prefix == "/" for prefix, _ in self._mounts)
        self._access = access
        # None with tracing off: each traced step is then one `is None` test.
        self._spans = spans
        self._clock = clock
        self._wall_clock = wall_clock
        self._id_prefix = os.urandom(4).hex()
        self._ids = itertools.count(1)

    async def __call__(self, scope: Scope, proto: HTTPProtocol) -> None:
        if scope.proto != "http":
            return
        path = scope.path
        request_id = self._request_id(scope)
        # Every line logged while this request is served carries its id: the task is
        # this request's own (llmgw.http.http1), so the value ends with it.
        REQUEST_ID.set(request_id)
        plain = proto
        cors = self._cors
        if cors is not None:
            extra = cors.response_headers(scope.headers.get("origin"))
            if extra:
                proto = WithHeaders(proto, extra)
        # The route's label in llmgw_requests_total: its template, never a client's path.
        route = path
        try:
            kind = _GENERATION_ROUTES.get(path)
            if kind is not None:
                if scope.method != "POST":
                    self._other_method(scope, plain, path, "POST", request_id, route)
                    return
                spans = self._spans
                if spans is None:
                    await self._generate(scope, proto, kind, request_id, None)
                else:
                    await self._traced(scope, proto, kind, request_id, spans)
            elif path == "/v1/models" or path.startswith("/v1/models/"):
                if path != "/v1/models":
                    route = MODEL_ROUTE
                if scope.method != "GET":
                    self._other_method(scope, plain, path, "GET", request_id, route)
                    return
                if self._spans is None:
                    principal = await self._authenticate(scope)
                    self._list_models(proto, path, principal, request_id)
                else:
                    await self._traced_models(scope, proto, path, request_id, self._spans)
                self._metrics.served(route, 200)
            elif path in ("/health", "/healthz") or (path == "/" and not self._root_mounted):
                proto.response_bytes(
                    200,
                    [("content-type", "text/plain"), ("x-request-id", request_id)],
                    b"llmgw: the OpenAI API is under /v1\n",
                )
                self._metrics.served(route, 200)
            else:
                for prefix, app in self._mounts:
                    if path == prefix or path.startswith(prefix + "/"):
                        route = prefix
                        await app(
                            scope,
                            CountedProtocol(
                                WithHeaders(proto, (("x-request-id", request_id),)), self._metrics, prefix
                            ),
                        )
                        return
                route = OTHER_ROUTE
                raise NotFound(
                    f"{scope.method} {path} is not an API route: the API is under /v1", code="unknown_route"
                )
        except ApiError as error:
            self._refuse(proto, error, request_id, route, "", scope, generation=kind is not None)

    async def serve_as(
        self,
        scope: Scope,
        proto: HTTPProtocol,
        principal: Principal | None,
        band: str | None,
        *,
        pinned: bool = False,
    ) -> None:
        """One generation request made inside the gateway (a batch's line, llmgw.batch)
        on behalf of `principal`, in admission band `band` (None: the principal's own):
        the same path as a client's, limits, budgets, guardrails and usage included,
        without an Authorization header to check. `pinned`: the model's own replicas
        only, with no canary split and no fallback (an evaluation of that model)."""
        kind = _GENERATION_ROUTES.get(scope.path)
        if kind is None:
            raise NotFound(f"{scope.path} is not a generation route", code="unknown_route")
        request_id = self._request_id(scope)
        REQUEST_ID.set(request_id)
        try:
            await self._generate(scope, proto, kind, request_id, None, given=(principal, band), pinned=pinned)
        except ApiError as error:
            self._refuse(proto, error, request_id, scope.path, "", scope, generation=True)

    def _refuse(
        self,
        proto: HTTPProtocol,
        error: ApiError,
        request_id: str,
        route: str,
        model: str,
        scope: Scope,
        *,
        generation: bool,
        band: str = "",
    ) -> None:
        """Answers a refusal the gateway made, counts it (`model` empty until the
        request's model is resolved: a name the client made up is no metric label) and
        queues its access line; one on a generation route also leaves a usage record
        with auth on."""
        auth = self._auth
        # The caller, if its key is one this gateway knows (a 401 has none).
        header = scope.headers.get("authorization")
        principal = None if auth is None else auth.known(header, self._wall_clock())
        if generation and auth is not None:
            now = self._clock()
            auth.refused(principal, error.status, request_id, now, now)
        status, headers, body = api_error_response(error)
        headers.append(("x-request-id", request_id))
        reason = refusal_reason(error)
        self._metrics.refused(route, model, status, reason)
        proto.response_bytes(status, headers, body)
        access = self._access
        if access is not None:
            access.refused(
                AccessLine(
                    self._wall_clock(),
                    request_id,
                    current_trace_id(),
                    scope.method,
                    scope.path,
                    model,
                    status,
                    band=band,
                    key_id=None if principal is None else principal.key_id,
                    reason=reason,
                )
            )

    def _other_method(
        self, scope: Scope, plain: HTTPProtocol, path: str, allow: str, request_id: str, route: str
    ) -> None:
        """A route asked with a method it does not take: a browser's CORS preflight,
        answered through `plain` (the protocol without the CORS headers of an ordinary
        answer, which a preflight's replace), or 405."""
        cors = self._cors
        origin = scope.headers.get("origin")
        if scope.method == "OPTIONS" and cors is not None and origin is not None:
            wanted = scope.headers.get("access-control-request-method")
            if wanted is not None:
                if not cors.allows(origin):
                    raise Forbidden(
                        f"origin {origin} may not call this API from a browser: add it to "
                        "router.cors.origins",
                        code="origin_not_allowed",
                    )
                headers = list(
                    cors.preflight_headers(origin, allow, scope.headers.get("access-control-request-headers"))
                )
                headers.append(("x-request-id", request_id))
                plain.response_bytes(204, headers, b"")
                self._metrics.served(route, 204)
                return
        raise MethodNotAllowed(f"{path} takes {allow}", allow=allow)

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
        if given and _CLIENT_REQUEST_ID.fullmatch(given):
            return given
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

    async def _traced(
        self, scope: Scope, proto: HTTPProtocol, kind: Kind, request_id: str, spans: Spans
    ) -> None:
        """A generation request with tracing on: inside its SERVER span when sampled,
        else as untraced, passing the client's trace context on to the replica."""
        path = scope.path
        trace = spans.request(scope.method, path, path, scope.headers, request_id)
        if trace is None:
            passed = spans.passed_on(scope.headers) if scope.headers.get("traceparent") else b""
            await self._generate(scope, proto, kind, request_id, None, passed)
            return
        seen = StatusSeen(proto)
        try:
            await self._generate(scope, seen, kind, request_id, trace)
        except ApiError as error:
            self._refuse(seen, error, request_id, path, "", scope, generation=True)
        except BaseException as error:
            trace.fail(trace.span, error)
            raise
        finally:
            trace.end(seen.status)

    async def _traced_models(
        self, scope: Scope, proto: HTTPProtocol, path: str, request_id: str, spans: Spans
    ) -> None:
        """The model listing with tracing on: a SERVER span, with an auth step."""
        route = "/v1/models" if path == "/v1/models" else MODEL_ROUTE
        trace = spans.request(scope.method, route, path, scope.headers, request_id)
        if trace is None:
            self._list_models(proto, path, await self._authenticate(scope), request_id)
            return
        seen = StatusSeen(proto)
        try:
            if self._auth is None:
                principal = None
            else:
                with trace.block("auth"):
                    principal = await self._authenticate(scope)
            self._list_models(seen, path, principal, request_id)
        except ApiError as error:
            self._refuse(seen, error, request_id, route, "", scope, generation=False)
        finally:
            trace.end(seen.status)

    async def _generate(
        self,
        scope: Scope,
        proto: HTTPProtocol,
        kind: Kind,
        request_id: str,
        trace: RequestTrace | None,
        passed: bytes = b"",
        given: tuple[Principal | None, str | None] | None = None,
        pinned: bool = False,
    ) -> None:
        """One generation request; `trace` with tracing on and the request sampled,
        `passed` the client's trace context for a replica when it is not; `given` the
        caller and band of a request made inside the gateway (`serve_as`), `pinned` one
        for the model's own replicas only."""
        started = self._clock()
        # `_authenticate` without its coroutine where it would await nothing (auth off,
        # or a key used before): the usual request pays a dictionary lookup only.
        auth = self._auth
        if given is not None:
            principal = given[0]
        elif trace is None or auth is None:
            principal = (
                None
                if auth is None
                else auth.known(scope.headers.get("authorization"), self._wall_clock())
                or await self._authenticate(scope)
            )
        else:
            with trace.block("auth"):
                principal = auth.known(scope.headers.get("authorization"), self._wall_clock()) or (
                    await self._authenticate(scope)
                )
        raw = await self._read_body(scope, proto)
        request = parse_request(kind, raw)
        if trace is not None:
            trace.asked(OPERATIONS[kind], request.model, request.stream, request.max_tokens)
        session = scope.headers.get(self._session_header)
        if session:
            request.session = str(session)
        routable = bool(self._endpoints.for_model(request.model))
        target = self._resolver.resolve(request.model, routable=routable)
        if not self._visible(principal, target):
            # Not allowed to this caller is answered as not existing at all.
            raise unknown_model(request.model)
        # From here on a refusal is counted under the model it was for.
        try:
            check_limits(request, target)
            guard = self._guard
            if guard is not None and guard.active:
                if trace is None:
                    request = await self._guard_input(guard, kind, request, principal)
                else:
                    with trace.block("guard.input", current=True):
                        request = await self._guard_input(guard, kind, request, principal)
            if trace is not None:
                request.trace = trace
            elif passed:
                request.trace_context = passed
            chain: list[Target] = [target]
            for name in () if pinned else target.fallbacks:
                fallback = self._resolver.fallback(name)
                if fallback is not None and self._visible(principal, fallback):
                    chain.append(fallback)
            named: Target | None = None
            canaries = self._canaries
            # An adapter is asked of the model's own replicas: a candidate may not hold it.
            if canaries is not None and not pinned and target.engine_model == target.model:
                candidate = canaries.choose(target.model, request.session)
                if candidate is not None:
                    # The operator's choice, not the caller's: no visibility check, and
                    # the model itself next in the chain should the candidate fail.
                    chosen = self._resolver.fallback(candidate)
                    if chosen is not None:
                        named = target
                        chain.insert(0, chosen)
            cache = self._cache
            if (
                cache is not None
                and principal is not None
                and principal.cache_ttl_s
                and principal.project_id is not None
                # An embedding is the same every time; generation only when it does not sample.
                and (kind is Kind.EMBEDDINGS or cacheable(request.body))
            ):
                key = cache_key(
                    principal.project_id,
                    kind.path,
                    target.model,
                    request.stream,
                    request.wants_usage,
                    request.body,
                )
                entry = cache.get(key)
                if entry is not None:
                    # Before admission and the charge: a hit holds no replica and costs nothing.
                    request.account = self._cached_account(principal, request, scope)
                    await self._dispatcher.replay(proto, request, entry, request_id, started)
                    return
                request.cache = (key, principal.cache_ttl_s)
            if principal is not None:
                request.account = self._charge(principal, request, target, scope)
                if request.guard_flagged:
                    tags = {**request.account.tags, FLAG_TAG: request.guard_flagged}
                    request.account = request.account._replace(tags=tags)
                band_name = principal.band
            else:
                band_name = scope.headers.get(self._band_header) if self._trust_band_header else None
            if given is not None and given[1] is not None:
                band_name = given[1]
            band = self._flow.band(band_name)
            request.band = band.name
            task = asyncio.current_task()
            assert task is not None
            stay = self._departures.enter(proto, task, asyncio.get_running_loop().time())
            try:
                if not self._flow.admit_now(target.model, band):
                    self._departures.watch_now(stay)
                    queued_at = self._clock()
                    if trace is None:
                        await self._flow.wait(target.model, band)
                    else:
                        with trace.block("admission.wait", {"llmgw.band": band.name}):
                            await self._flow.wait(target.model, band)
                    if request.account is not None:
                        request.account = request.account._replace(queued_s=self._clock() - queued_at)
                self._flow.dispatched(target.model, band)
                request.engine_priority = self._flow.engine_priority(band)
                try:
                    await self._dispatcher.serve(proto, request, chain, request_id, started, named)
                finally:
                    self._flow.finished(target.model, band)
            except asyncio.CancelledError:
                self._unreserve(request)
                if not stay.gone:
                    raise
                # The client left; the replica's connection was closed on the way out.
            except BaseException:
                self._unreserve(request)  # failed unanswered: no usage will release it
                raise
            finally:
                self._departures.leave(stay)
        except ApiError as error:
            self._refuse(
                proto, error, request_id, scope.path, target.model, scope, generation=True, band=request.band
            )

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
        auth = self._auth
        floor, wanted = request.prompt_token_floor, request.max_tokens
        counted = auth.admit(principal, floor + (wanted or 0), self._wall_clock())
        reservation = None
        if principal.budgets:
            # The most it may cost: what it asks for, else the most the model writes.
            output = wanted if wanted is not None else target.max_output
            if request.kind is Kind.EMBEDDINGS:
                output = 0
            reservation = auth.reserve(principal, target.model, floor, output)
        header, metadata = scope.headers.get(_TAGS_HEADER), request.body.get("metadata")
        if not header and not metadata:
            return new_account((principal, counted, NO_TAGS, 0.0, reservation))
        tags = parse_tags(header, metadata if isinstance(metadata, dict) else None)
        return new_account((principal, counted, tags, 0.0, reservation))

    def _cached_account(self, principal: Principal, request: ClientRequest, scope: Scope) -> Account:
        """The account of a cache hit: no tokens counted, nothing reserved, its tags and
        `llmgw.cache=hit` on its usage record."""
        header, metadata = scope.headers.get(_TAGS_HEADER), request.body.get("metadata")
        tags = parse_tags(header, metadata if isinstance(metadata, dict) else None)
        tags[CACHE_TAG] = "hit"
        if request.guard_flagged:
            tags[FLAG_TAG] = request.guard_flagged
        return new_account((principal, 0, tags, 0.0, None))

    def _unreserve(self, request: ClientRequest) -> None:
        account = request.account
        if account is not None and account.reservation is not None:
            assert self._auth is not None
            self._auth.release(account.reservation)

    def _list_models(
        self, proto: HTTPProtocol, path: str, principal: Principal | None, request_id: str
    ) -> None:
        allowed = None if principal is None or self._auth is None else self._allowed(principal)
        if path == "/v1/models":
            body = orjson.dumps({"object": "list", "data": self._models.list(allowed)})
        else:
            # A model name's slash may come encoded; the server leaves it so for routing.
            name = path[len("/v1/models/") :].replace("%2F", "/")
            entry = self._models.get(name, allowed)
            if entry is None:
                raise unknown_model(name)
            body = orjson.dumps(entry)
        proto.response_bytes(200, [("content-type", JSON), ("x-request-id", request_id)], body)

    def _allowed(self, principal: Principal) -> Callable[[str], bool]:
        gate = self._auth
        assert gate is not None
        return lambda model: gate.visible(principal, model, None)
