"""Serving one generation request: tries across replicas, breakers, fallbacks, relay.

For the requested model and then each of its fallbacks in order, up to
`router.retries` further replicas are tried after the first, each chosen by the picker
among those whose breaker allows it and that were not tried yet. A try that fails
before the first byte reaches the client (connect error, 5xx, 429, a phase timeout)
counts against its replica's breaker and moves on. Once a stream has begun, a failure
ends it with an error event: the client is never handed a truncated answer as if it
were whole. Every answer says which model and which replica served it.

With a canary (llmgw.router.canary), the chain starts with the candidate the split
chose, then the model the client named: each try's outcome on either side is reported
to the canaries, which judge the candidate as it goes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from llmgw.errors import (
    IdleTimeout,
    NoCapacity,
    PhaseTimeout,
    TotalTimeout,
    UpstreamClosed,
    UpstreamError,
    UpstreamStatus,
    UpstreamUnavailable,
)
from llmgw.guard import FLAG_TAG, Hit, flag_tag
from llmgw.http.responses import (
    ENGINE_AUTH_STATUSES,
    as_api_error,
    stream_error_event,
    upstream_failure_reason,
)
from llmgw.http.rsgi import HTTPProtocol, ProtocolClosed, StreamTransport
from llmgw.obs.logs import current_trace_id
from llmgw.router.attempt import Attempt
from llmgw.router.endpoints import Endpoint, EndpointRegistry
from llmgw.router.failure_log import FailureLog
from llmgw.router.forward import Answer, OpenStream, PhaseLimits, fetch, open_stream, request_head
from llmgw.router.kv_routing import KVRouting
from llmgw.router.liveness import Liveness
from llmgw.router.lora_loader import AdapterLoader
from llmgw.router.metrics import GatewayMetrics
from llmgw.router.picker import Picker
from llmgw.router.request import ClientRequest
from llmgw.router.response_cache import Entry, ResponseCache
from llmgw.router.sse import SseRelay
from llmgw.router.targets import Target
from llmgw.router.usage import UsageRecord, UsageSink
from llmgw.upstream.watchdog import Watchdog

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from llmgw.guard import Guardrails, StreamScanner
    from llmgw.obs.spans import RequestTrace
    from llmgw.router.canary import Canaries


def _flag(request: ClientRequest, flags: list[Hit]) -> None:
    """Names what flagged the answer in the request's usage record (with auth on)."""
    account = request.account
    if flags and account is not None:
        tags = {**account.tags, FLAG_TAG: flag_tag(flags, account.tags.get(FLAG_TAG, ""))}
        request.account = account._replace(tags=tags)


_EVENT_STREAM = "text/event-stream"
CACHE_TAG = "llmgw.cache"
"""The usage record tag of an answer the response cache gave (value `hit`)."""
CACHE_HEADER = "x-llmgw-cache"


class _Kept:
    """The bytes of a stream sent to the client, for the response cache; given up
    (None) once they outgrow an entry."""

    __slots__ = ("chunks", "room")

    def __init__(self, room: int) -> None:
        self.chunks: list[bytes] | None = []
        self.room = room

    def add(self, data: bytes) -> None:
        chunks = self.chunks
        if chunks is not None and data:
            self.room -= len(data)
            if self.room < 0:
                self.chunks = None
            else:
                chunks.append(data)


class Dispatcher:
    """Forwards generation requests; one per gateway process."""

    def __init__(
        self,
        endpoints: EndpointRegistry,
        picker: Picker,
        metrics: GatewayMetrics,
        usage: UsageSink,
        watchdog: Watchdog,
        limits: PhaseLimits,
        retries: int,
        inject_usage: bool,
        retry_after: float,
        clock: Callable[[], float] = time.monotonic,
        failures: FailureLog | None = None,
        guard: Guardrails | None = None,
        canaries: Canaries | None = None,
        cache: ResponseCache | None = None,
        adapters: AdapterLoader | None = None,
        kv: KVRouting | None = None,
    ) -> None:
        self._cache = cache
        self._adapters = adapters
        self._kv = kv
        self._guard = guard
        self._canaries = canaries
        self._endpoints = endpoints
        self._picker = picker
        self._metrics = metrics
        self._usage = usage
        self._watchdog = watchdog
        self._limits = limits
        self._retries = retries
        self._inject_usage = inject_usage
        self._retry_after = retry_after
        self._clock = clock
        self._failures = failures or FailureLog(clock=clock)
        self._liveness = Liveness(limits.response_header_s, limits.replica_fresh_s, limits.total_s, clock)

    async def serve(
        self,
        proto: HTTPProtocol,
        request: ClientRequest,
        chain: list[Target],
        request_id: str,
        started: float,
        named: Target | None = None,
    ) -> None:
        """Answers `request` from the first target in `chain` that can; raises ApiError
        when none could before anything was sent. `named` is the target the client named
        when a canary's candidate leads the chain (refusals and metrics name it)."""
        rid = request_id.encode()
        last_error: UpstreamError | None = None
        # The latest failed try, logged once it is known whether another try follows.
        failed: tuple[str, str, int] | None = None
        lead = chain[0]
        first = lead if named is None else named
        attempts = self._retries + 1
        trace = request.trace
        tries = 0
        for target in chain:
            tried: set[str] = set()
            for attempt in range(attempts):
                now = self._clock()
                candidates = [
                    e
                    for e in self._endpoints.for_model(target.model)
                    if e.id not in tried and e.breaker.available(now)
                ]
                adapters = self._adapters if target.on_demand else None
                if adapters is not None and candidates:
                    # Replicas holding the adapter, else those with a slot to load it in.
                    candidates = adapters.choose(target.engine_model, candidates, target.max_loaded_adapters)
                if not candidates:
                    break
                kv = None
                if attempt == 0 and self._kv is not None and target.routing_profile == "chat":
                    kv = await self._kv.lengths(candidates, request)
                tries += 1
                if trace is None:
                    endpoint, _ = self._picker.pick(
                        candidates, request.prompt, request.session, target.routing_profile, now, kv
                    )
                else:
                    picking = time.time_ns()
                    endpoint, why = self._picker.pick(
                        candidates, request.prompt, request.session, target.routing_profile, now, kv
                    )
                    trace.picked(picking, target.model, endpoint.id, why, len(candidates), tries)
                tried.add(endpoint.id)
                if attempt:
                    self._metrics.retried(first.model)
                if failed is not None and last_error is not None:
                    self._failures.failed(request_id, *failed, attempts, last_error, final=False)
                    failed = None
                budget = started + self._limits.total_s - now
                if budget <= 0:
                    if failed is not None and last_error is not None:
                        self._failures.failed(request_id, *failed, attempts, last_error, final=True)
                    raise as_api_error(TotalTimeout(self._limits.total_s), first.model, self._retry_after)
                try:
                    if adapters is None:
                        done = await self._try(proto, request, target, endpoint, rid, started, budget, tries)
                    else:
                        done = await self._try_adapter(
                            adapters, proto, request, target, endpoint, rid, started, budget, tries
                        )
                except UpstreamError as exc:
                    last_error = exc
                    failed = (endpoint.id, target.model, attempt + 1)
                    self._metrics.upstream_failed(endpoint.id, upstream_failure_reason(exc))
                    endpoint.last_error = (self._clock(), str(exc))
                    continue
                if done and target is not first and target is not lead:
                    self._metrics.fell_back(first.model, target.model)
                if done:
                    return
        if last_error is None:
            if any(self._endpoints.for_model(t.model) for t in chain):
                raise UpstreamUnavailable(
                    f"model {first.model!r}: every replica failed recently and is left out for "
                    "router.cooldown; try again shortly",
                    code="upstream_unavailable",
                    retry_after=self._retry_after,
                )
            raise NoCapacity(
                f"model {first.model!r} has no replica available right now; try again shortly",
                code="no_capacity",
                retry_after=self._retry_after,
            )
        if failed is not None:
            self._failures.failed(request_id, *failed, attempts, last_error, final=True)
        raise as_api_error(last_error, first.model, self._retry_after)

    async def replay(
        self, proto: HTTPProtocol, request: ClientRequest, entry: Entry, request_id: str, started: float
    ) -> None:
        """Answers `request` with a cached answer: the same bytes the first client was
        sent (a stream's events in order), marked `x-llmgw-cache: hit`. It is recorded
        with no tokens and the `llmgw.cache` tag, and charged to no limit or budget."""
        headers = [
            ("content-type", entry.content_type),
            ("x-request-id", request_id),
            ("x-llmgw-model", entry.model),
            (CACHE_HEADER, "hit"),
        ]
        chunks = entry.chunks
        first_byte: float | None = None
        status = 200
        trace = request.trace
        if trace is not None:
            trace.set("llmgw.cache", "hit")
            trace.set("llmgw.model", entry.model)
        if request.stream:
            headers.append(("cache-control", "no-cache"))
            first_byte = self._clock()
            transport = proto.response_stream(200, headers, chunks[0])
            try:
                for chunk in chunks[1:]:
                    await transport.send_bytes(chunk)
            except ProtocolClosed:
                status = 499
        else:
            proto.response_bytes(200, headers, chunks[0])
        finished = self._clock()
        self._metrics.answered(request.kind, entry.model, status, finished - started)
        self._usage.record(
            UsageRecord(
                request_id,
                entry.model,
                "cache",
                status,
                request.stream,
                None,
                started,
                first_byte,
                finished,
                request.account,
                request.kind.path,
                request.band,
                current_trace_id(),
            )
        )

    def _headers(
        self, request_id: str, target: Target, endpoint: Endpoint, content_type: str, request: ClientRequest
    ) -> list[tuple[str, str]]:
        headers = [
            ("content-type", content_type),
            ("x-request-id", request_id),
            ("x-llmgw-model", target.model),
            ("x-llmgw-replica", endpoint.id),
        ]
        if request.cache is not None:
            headers.append((CACHE_HEADER, "miss"))
        account = request.account
        if account is not None:
            # With auth on: the caller's rate limits, as OpenAI sends them on every answer.
            account.principal.meter.add_headers(headers, time.time())
        return headers

    async def _try_adapter(
        self,
        adapters: AdapterLoader,
        proto: HTTPProtocol,
        request: ClientRequest,
        target: Target,
        endpoint: Endpoint,
        rid: bytes,
        started: float,
        budget: float,
        number: int,
    ) -> bool:
        """`_try` for an adapter loaded on demand: loaded there first, and held there
        (not unloaded for another) until the answer is over."""
        adapter = target.engine_model
        adapters.slots.begin(endpoint.id, adapter)
        try:
            await adapters.ensure(endpoint, adapter, target.adapter_source, target.max_loaded_adapters)
            return await self._try(proto, request, target, endpoint, rid, started, budget, number, adapters)
        finally:
            adapters.slots.end(endpoint.id, adapter)

    async def _try(
        self,
        proto: HTTPProtocol,
        request: ClientRequest,
        target: Target,
        endpoint: Endpoint,
        rid: bytes,
        started: float,
        budget: float,
        number: int = 1,
        adapters: AdapterLoader | None = None,
    ) -> bool:
        """One try (the request's `number`th); True once the client has been answered.
        Raises UpstreamError when the try failed before anything was sent."""
        spec = endpoint.spec
        name = spec.upstream_model or target.engine_model
        priority = request.engine_priority if spec.priority_scheduling else None
        lora = spec.lora_ids.get(name) if spec.lora_ids else None
        body = request.body_for(
            name, ask_usage=self._inject_usage, priority=priority, lora=lora, lora_scale=target.adapter_scale
        )
        trace = request.trace
        span: Span | None = None
        if trace is None:
            head = request_head(endpoint, request.kind.path, len(body), rid, request.trace_context)
        else:
            pool = endpoint.pool
            span, lines = trace.attempt(endpoint.id, pool.host, pool.port, number)
            head = request_head(endpoint, request.kind.path, len(body), rid, lines)
        now = self._clock()
        endpoint.inflight += 1
        endpoint.breaker.begin(now)
        # The try's connection and deadline: ended (released or closed) in the finally.
        attempt = Attempt(endpoint, self._watchdog)
        attempt.span = span
        try:
            try:
                result: Answer | OpenStream
                if request.stream:
                    result = await open_stream(attempt, head, body, self._limits, budget)
                else:
                    result = await fetch(attempt, head, body, self._limits, budget, self._liveness)
            except UpstreamStatus as exc:
                if self._canaries is not None:
                    # A replica's 5xx is its failure; its 429 or a refused key is not the
                    # model's quality, and a client's own 4xx never comes here.
                    self._canaries.observed(target.model, error=exc.status >= 500)
                if exc.status in ENGINE_AUTH_STATUSES:
                    # The replica refuses the gateway's key: every request there would
                    # fail the same way, so it leaves routing now rather than after
                    # failure_threshold more clients paid for finding out.
                    endpoint.breaker.trip(self._clock())
                    log.warning(
                        "replica %s (model %s) refused the gateway's engine key with %d; it is "
                        "out of routing for router.cooldown: check its api_key",
                        endpoint.id,
                        target.model,
                        exc.status,
                    )
                elif endpoint.spec.external and exc.status == 429:
                    # A provider's key limited: every request on it would be.
                    endpoint.breaker.trip(self._clock())
                else:
                    endpoint.breaker.failed(self._clock())
                raise
            except UpstreamError:
                endpoint.breaker.failed(self._clock())
                if self._canaries is not None:
                    self._canaries.observed(target.model, error=True)
                raise
            except BaseException:
                endpoint.breaker.abandoned(self._clock())
                raise
            if adapters is not None and isinstance(result, Answer) and result.status == 404:
                # The replica does not know the adapter the router thought it held: it
                # restarted empty. Forgotten there, the next try loads it again.
                adapters.missing(endpoint, target.engine_model)
                endpoint.breaker.succeeded()
                raise UpstreamStatus(404, result.body)
            endpoint.breaker.succeeded()
            request_id = rid.decode()
            canaries = self._canaries
            if isinstance(result, Answer):
                if canaries is not None:
                    canaries.observed(target.model, error=result.status >= 500, ttft_s=self._clock() - now)
                answer = result.body
                applied = request.guard
                if applied is not None and applied.output and result.status == 200 and self._guard:
                    # A block raises the 400 before any byte of the answer is sent.
                    flags: list[Hit] = []
                    if trace is None:
                        answer = await self._guard.check_answer(answer, request.prompt, applied, flags)
                    else:
                        with trace.block("guard.output", current=True):
                            answer = await self._guard.check_answer(answer, request.prompt, applied, flags)
                    _flag(request, flags)
                proto.response_bytes(
                    result.status,
                    self._headers(request_id, target, endpoint, result.content_type, request),
                    answer,
                )
                if request.cache is not None and result.status == 200 and self._cache is not None:
                    key, ttl_s = request.cache
                    self._cache.put(key, result.content_type, (answer,), target.model, ttl_s)
                finished = self._clock()
                self._metrics.answered(request.kind, target.model, result.status, finished - started)
                if trace is not None:
                    trace.answered(target.model, endpoint.id, result.body)
                self._usage.record(
                    UsageRecord(
                        request_id,
                        target.model,
                        endpoint.id,
                        result.status,
                        False,
                        result.body if result.status == 200 else None,
                        started,
                        None,
                        finished,
                        request.account,
                        request.kind.path,
                        request.band,
                        current_trace_id(),
                    )
                )
                return True
            status, first_byte = await self._relay(
                proto, request, target, endpoint, result, request_id, started
            )
            if canaries is not None and status != 499:
                # A stream the replica broke off is its error; one the client left is neither side's.
                canaries.observed(target.model, error=status != 200, ttft_s=first_byte - now)
            return True
        except BaseException as error:
            if span is not None and trace is not None:
                trace.fail(span, error)
            raise
        finally:
            attempt.end()
            endpoint.inflight -= 1
            if span is not None:
                span.end()

    async def _relay(
        self,
        proto: HTTPProtocol,
        request: ClientRequest,
        target: Target,
        endpoint: Endpoint,
        stream: OpenStream,
        request_id: str,
        started: float,
    ) -> tuple[int, float]:
        """Forwards a begun stream to the client as it arrives, then accounts for it;
        returns the status it was accounted under (as `_pump`) and when its first bytes came."""
        first_byte = self._clock()
        self._metrics.first_token(target.model, first_byte - started)
        relay = SseRelay(strip_usage=not request.wants_usage)
        applied = request.guard
        scanner = (
            self._guard.scanner(applied)
            if applied is not None and applied.output and self._guard is not None
            else None
        )
        headers = self._headers(request_id, target, endpoint, _EVENT_STREAM, request)
        headers.append(("cache-control", "no-cache"))
        # The response ends when the handler returns; _pump holds no caught exception in
        # a local all the same, which would tie its frame (and the transport, and the
        # request's objects) into a cycle until the collector ran.
        # What came with the replica's head goes out with the client's.
        first = relay.feed(stream.first)
        if scanner is not None:
            first = await self._judged(scanner, scanner.feed(first), request.prompt)
        trace = request.trace
        if trace is not None:
            trace.saw(first)
        cache = self._cache
        kept = None if request.cache is None or cache is None else _Kept(cache.max_entry_bytes)
        if kept is not None:
            kept.add(first)
        status = await self._pump(
            proto.response_stream(200, headers, first),
            stream,
            relay,
            endpoint,
            target,
            started,
            request_id,
            scanner,
            trace,
            request.prompt,
            kept,
        )
        if (
            kept is not None
            and kept.chunks is not None
            and status == 200
            and (scanner is None or scanner.blocked is None)
            and cache is not None
            and request.cache is not None
        ):
            key, ttl_s = request.cache
            cache.put(key, _EVENT_STREAM, tuple(kept.chunks), target.model, ttl_s)
        if trace is not None:
            trace.answered(target.model, endpoint.id, None, relay.usage_event)
        if scanner is not None and self._guard is not None:
            self._guard.stream_done(scanner)
            _flag(request, [h for h in scanner.hits if h.action == "flag"])
        finished = self._clock()
        self._metrics.answered(request.kind, target.model, status, finished - started)
        self._usage.record(
            UsageRecord(
                request_id,
                target.model,
                endpoint.id,
                status,
                True,
                relay.usage_event,
                started,
                first_byte,
                finished,
                request.account,
                request.kind.path,
                request.band,
                current_trace_id(),
            )
        )
        return status, first_byte

    async def _pump(
        self,
        transport: StreamTransport,
        stream: OpenStream,
        relay: SseRelay,
        endpoint: Endpoint,
        target: Target,
        started: float,
        request_id: str,
        scanner: StreamScanner | None = None,
        trace: RequestTrace | None = None,
        prompt: str = "",
        kept: _Kept | None = None,
    ) -> int:
        """Copies the stream until it ends; returns the status to account it under (200,
        499 when the client left, 502 when the replica broke it off). With a guard
        `scanner`, what is sent is what it releases, and a block ends the stream."""
        conn = stream.conn
        attempt = stream.attempt
        loop = asyncio.get_running_loop()
        # The total bound counts from the request's arrival, in the loop's clock.
        total = self._limits.total_s
        deadline = loop.time() + (started + total - self._clock())
        idle = self._limits.idle_s
        try:
            while True:
                if scanner is not None and scanner.blocked is not None:
                    conn.close()  # the replica stops generating what nobody will read
                    return 200
                now = loop.time()
                if now + idle < deadline:
                    attempt.move_at(now + idle, IdleTimeout, idle)
                else:
                    attempt.move_at(deadline, TotalTimeout, total)
                chunk = await conn.read_available()
                if chunk is None:
                    break
                out = relay.feed(chunk)
                if scanner is not None:
                    out = await self._judged(scanner, scanner.feed(out), prompt)
                if out:
                    if trace is not None:
                        trace.saw(out)
                    if kept is not None:
                        kept.add(out)
                    await transport.send_bytes(out)
            rest = relay.flush()
            if scanner is not None:
                rest = await self._judged(scanner, scanner.feed(rest), prompt)
            if rest:
                if trace is not None:
                    trace.saw(rest)
                if kept is not None:
                    kept.add(rest)
                await transport.send_bytes(rest)
            if not relay.done:
                raise UpstreamClosed("the replica ended the stream without its closing [DONE] event")
        except ProtocolClosed:
            # The client left: closing the replica's connection makes it stop generating.
            attempt.end()
            if trace is not None:
                trace.set("llmgw.client_left", True)
            return 499
        except UpstreamError as exc:
            # Closed before the client is told, so the replica stops at once.
            attempt.end()
            if trace is not None:
                # The client got a broken answer: the try and the request both failed.
                if attempt.span is not None:
                    trace.fail(attempt.span, exc)
                trace.fail(trace.span, exc)
            timed_out = isinstance(exc, PhaseTimeout)
            self._failures.failed(request_id, endpoint.id, target.model, 1, 1, exc, final=True, cut=True)
            await self._broken(
                transport, endpoint, target, str(exc), upstream_failure_reason(exc), timed_out=timed_out
            )
            return 502
        attempt.whole = True
        attempt.end()
        return 200

    async def _judged(self, scanner: StreamScanner, out: bytes, prompt: str) -> bytes:
        """What the scanner released, once the stream's judges (when due) let it go; the
        closing events instead when they block."""
        if self._guard is None or not scanner.judge_due():
            return out
        return await self._guard.judge_stream(scanner, prompt) or out

    async def _broken(
        self,
        transport: StreamTransport,
        endpoint: Endpoint,
        target: Target,
        why: str,
        kind: str,
        *,
        timed_out: bool,
    ) -> None:
        """Ends a stream the replica broke off with an error event, and counts it."""
        self._metrics.stream_interrupted(target.model)
        self._metrics.upstream_failed(endpoint.id, kind)
        endpoint.breaker.failed(self._clock())
        endpoint.last_error = (self._clock(), why)
        with contextlib.suppress(ProtocolClosed):
            await transport.send_bytes(stream_error_event(why, timed_out=timed_out))
