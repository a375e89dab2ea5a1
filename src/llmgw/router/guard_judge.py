"""The guard's judge, asked through the gateway's own routing: a chat completion sent
to one of the judge model's published replicas (the least busy whose breaker allows
it), with the same phase bounds as any request. The caller bounds the whole ask by the
check's timeout."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import orjson

from llmgw.errors import UpstreamError
from llmgw.router.attempt import Attempt
from llmgw.router.endpoints import EndpointRegistry
from llmgw.router.forward import PhaseLimits, fetch, request_head
from llmgw.router.request import Kind
from llmgw.upstream.watchdog import Watchdog

if TYPE_CHECKING:
    from llmgw.obs.spans import Spans


class JudgeFailed(UpstreamError):
    """The judge model has no replica to ask, or its answer was not a chat completion."""


class RouterJudge:
    """Implements llmgw.guard.Judge over the endpoint registry."""

    def __init__(
        self,
        endpoints: EndpointRegistry,
        limits: PhaseLimits,
        watchdog: Watchdog,
        clock: Callable[[], float] = time.monotonic,
        spans: Spans | None = None,
    ) -> None:
        self._spans = spans
        self._endpoints = endpoints
        self._limits = limits
        self._watchdog = watchdog
        self._clock = clock
        self._ids = itertools.count(1)

    async def ask(self, model: str, messages: list[dict[str, str]]) -> str:
        now = self._clock()
        candidates = [e for e in self._endpoints.for_model(model) if e.breaker.available(now)]
        if not candidates:
            raise JudgeFailed(f"guard model {model!r} has no replica available")
        endpoint = min(candidates, key=lambda e: e.inflight)
        name = endpoint.spec.upstream_model or model
        body = orjson.dumps({"model": name, "messages": messages, "max_tokens": 32, "temperature": 0})
        # Within a traced request (the guard step is the current span), a span of its
        # own, whose context the judge's engine continues.
        spans = self._spans
        span = None if spans is None else spans.judge(model, endpoint.id)
        lines = b"" if spans is None or span is None else spans.lines(span)
        head = request_head(endpoint, Kind.CHAT.path, len(body), f"guard-{next(self._ids)}".encode(), lines)
        endpoint.inflight += 1
        attempt = Attempt(endpoint, self._watchdog)
        attempt.span = span
        try:
            answer = await fetch(attempt, head, body, self._limits, self._limits.total_s)
        except BaseException as error:
            if spans is not None and span is not None:
                spans.fail(span, error)
            raise
        finally:
            attempt.end()  # a judge cut short by its check's timeout closes its connection
            endpoint.inflight -= 1
            if span is not None:
                span.end()
        if answer.status != 200:
            raise JudgeFailed(f"guard model {model!r} answered {answer.status}")
        try:
            content = orjson.loads(answer.body)["choices"][0]["message"]["content"]
        except (orjson.JSONDecodeError, KeyError, IndexError, TypeError) as exc:
            raise JudgeFailed(f"guard model {model!r} answered no chat completion") from exc
        if not isinstance(content, str):
            raise JudgeFailed(f"guard model {model!r} answered no text")
        return content
