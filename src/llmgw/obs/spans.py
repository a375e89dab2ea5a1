"""The spans llmgw makes, over a tracer the server owns (llmgw.obs.tracing builds it).

`Spans.request` opens the SERVER span of one API request, continuing the client's W3C
trace context (`traceparent`, `tracestate`) when it sent one, and returns a
`RequestTrace` only when the request is sampled: an unsampled one goes down the same
untraced path as with tracing off, so its steps cost nothing. A `RequestTrace` starts
the request's child spans with the server span as their explicit parent (the request
path hands it along rather than keeping it in a context variable), and gives each
upstream try the `traceparent` its engine continues (vLLM and SGLang read it).
The judge calls of the guardrails sit below a guard step through the context: that step
is made current while it runs, and `Spans.judge` looks there.

This module imports the OpenTelemetry API, so it is imported only once tracing is on;
the request path names its types under TYPE_CHECKING only.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from random import getrandbits
from typing import TYPE_CHECKING, Protocol

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.propagators.textmap import Getter
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from llmgw.obs import genai

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Tracer
    from opentelemetry.util.types import AttributeValue

    from llmgw.obs.provider import DrawnIds

TRACEPARENT = "traceparent"
# What the tail of a traced stream keeps for its finish reasons and usage: the last
# content chunk, the usage chunk and [DONE] fit in it many times over.
_TAIL_BYTES = 4096
_PROPAGATOR = TraceContextTextMapPropagator()
_LOW_64_BITS = (1 << 64) - 1


class Headers(Protocol):
    """A request's headers as the HTTP server gives them (llmgw.http.rsgi.Headers)."""

    def get(self, name: str, /) -> str | None: ...


class _HeaderGetter(Getter["Headers"]):
    """Reads the trace context from a request's headers (`get` by lower-case name)."""

    def get(self, carrier: Headers, key: str) -> list[str] | None:
        value = carrier.get(key)
        return None if value is None else [value]

    def keys(self, carrier: Headers) -> list[str]:
        return [name for name in (TRACEPARENT, "tracestate") if carrier.get(name) is not None]


_GETTER = _HeaderGetter()


def failed(span: Span, error: BaseException) -> None:
    """Marks `span` failed by `error`: its type, its message and the status."""
    span.record_exception(error)
    span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))


class Spans:
    """Starts llmgw's spans on one tracer; one per server. With `ids` and `bound` (the
    provider's DrawnIds and its TraceIdRatioBased bound), a request that starts a new
    trace is decided on first: one random draw, and nothing more when it is not
    sampled, rather than the SDK's making and discarding a span for it."""

    def __init__(self, tracer: Tracer, ids: DrawnIds | None = None, bound: int | None = None) -> None:
        self.tracer = tracer
        self._ids = ids
        self._bound = bound

    def request(
        self, method: str, route: str, path: str, headers: Headers, request_id: str
    ) -> RequestTrace | None:
        """The SERVER span of an API request, as a `RequestTrace`; None when it is not
        sampled (nothing more is recorded for it)."""
        parent = None
        if headers.get(TRACEPARENT):
            parent = _PROPAGATOR.extract(headers, getter=_GETTER)
        elif self._ids is not None and self._bound is not None:
            # The draw RandomIdGenerator makes, judged as TraceIdRatioBased judges it.
            drawn = getrandbits(128)
            if drawn & _LOW_64_BITS >= self._bound or not drawn:
                return None
            self._ids.drawn = drawn
        span = self.tracer.start_span(
            f"{method} {route}",
            context=parent,
            kind=SpanKind.SERVER,
            attributes={
                "http.request.method": method,
                "http.route": route,
                "url.path": path,
                "llmgw.request_id": request_id,
            },
        )
        if not span.is_recording():
            return None
        return RequestTrace(self.tracer, span)

    @staticmethod
    def passed_on(headers: Headers) -> bytes:
        """The client's trace context as upstream header lines, for a request this
        gateway does not record (it passes the context on, as W3C asks of a participant
        that records nothing): read and written again by the W3C propagator, so what
        the replica gets is well formed; empty when the client sent none, or an
        invalid one."""
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier, context=_PROPAGATOR.extract(headers, getter=_GETTER))
        return _lines(carrier)

    @contextlib.contextmanager
    def span(self, name: str, attributes: Mapping[str, AttributeValue] | None = None) -> Iterator[Span]:
        """A span of its own (a control-plane pass, a decision in it), current while
        the block runs so that spans started inside are its children; an exception
        leaving the block fails it."""
        with self.tracer.start_as_current_span(name, attributes=attributes) as opened:
            yield opened

    @staticmethod
    def lines(span: Span) -> bytes:
        """`span`'s trace context as header lines for the request it stands for."""
        return context_lines(span)

    @staticmethod
    def fail(span: Span, error: BaseException) -> None:
        failed(span, error)

    def judge(self, model: str, replica: str) -> Span | None:
        """A CLIENT span for a guard's judge call, below the guard step that is current;
        None outside a traced request (a judge call must not start a trace of its own)."""
        if not trace.get_current_span().is_recording():
            return None
        return self.tracer.start_span(
            "guard.judge",
            kind=SpanKind.CLIENT,
            attributes={
                genai.OPERATION: "chat",
                genai.REQUEST_MODEL: model,
                "llmgw.replica": replica,
            },
        )


def context_lines(span: Span) -> bytes:
    """`span`'s trace context as upstream request header lines."""
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier, context=trace.set_span_in_context(span))
    return _lines(carrier)


def _lines(carrier: Mapping[str, str]) -> bytes:
    return b"".join(f"{name}: {value}\r\n".encode("latin-1") for name, value in carrier.items())


class RequestTrace:
    """One sampled API request: its SERVER span, and the steps below it."""

    __slots__ = ("_tail", "context", "span", "tracer")

    def __init__(self, tracer: Tracer, span: Span) -> None:
        self.tracer = tracer
        self.span = span
        self.context: Context = trace.set_span_in_context(span)
        self._tail = b""

    def step(
        self,
        name: str,
        attributes: Mapping[str, AttributeValue] | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
    ) -> Span:
        """A child span of the request, started now; the caller ends it."""
        return self.tracer.start_span(name, context=self.context, kind=kind, attributes=attributes)

    def picked(
        self, started_ns: int, model: str, replica: str, why: str, candidates: int, attempt: int
    ) -> None:
        """The `pick` step that began at `started_ns` (time.time_ns) and ends now, with
        the replica chosen and the picker's reason (only, round_robin, load, session,
        prefix). Made once the choice is known, so its attributes go in at once."""
        self.tracer.start_span(
            "pick",
            context=self.context,
            start_time=started_ns,
            attributes={
                "llmgw.model": model,
                "llmgw.replica": replica,
                "llmgw.pick.reason": why,
                "llmgw.pick.candidates": candidates,
                "llmgw.attempt": attempt,
            },
        ).end()

    def upstream(self, replica: str, host: str, port: int, attempt: int) -> Span:
        """The CLIENT span of one try on `replica`: from the dial to the end of its
        answer (the stream included); the caller ends it."""
        return self.tracer.start_span(
            "upstream",
            context=self.context,
            kind=SpanKind.CLIENT,
            attributes={
                "llmgw.replica": replica,
                "llmgw.attempt": attempt,
                "server.address": host,
                "server.port": port,
            },
        )

    def asked(self, operation: str, model: str, stream: bool, max_tokens: int | None) -> None:
        """What the request asks for, once it is parsed."""
        # Set together: each set_attribute takes the span's lock and checks the value.
        asked: dict[str, AttributeValue] = {
            genai.OPERATION: operation,
            genai.REQUEST_MODEL: model,
            "llmgw.stream": stream,
        }
        if max_tokens is not None:
            asked[genai.REQUEST_MAX_TOKENS] = max_tokens
        self.span.set_attributes(asked)

    def set(self, name: str, value: AttributeValue) -> None:
        self.span.set_attribute(name, value)

    @contextlib.contextmanager
    def block(
        self, name: str, attributes: Mapping[str, AttributeValue] | None = None, *, current: bool = False
    ) -> Iterator[Span]:
        """A child step lasting the block; an exception leaving the block fails it.
        `current`: the step is the context's span meanwhile, so a judge call made
        inside it (llmgw.guard knows nothing of traces) hangs below it."""
        step = self.step(name, attributes)
        token = otel_context.attach(trace.set_span_in_context(step)) if current else None
        try:
            yield step
        except BaseException as error:
            failed(step, error)
            raise
        finally:
            if token is not None:
                otel_context.detach(token)
            step.end()

    def attempt(self, replica: str, host: str, port: int, attempt: int) -> tuple[Span, bytes]:
        """An `upstream` span and the header lines that carry it to the replica."""
        span = self.upstream(replica, host, port, attempt)
        return span, context_lines(span)

    @staticmethod
    def fail(span: Span, error: BaseException) -> None:
        failed(span, error)

    def saw(self, data: bytes) -> None:
        """A piece of the streamed answer: the last few KiB are kept for `streamed`."""
        tail = self._tail + data
        self._tail = tail[-_TAIL_BYTES:] if len(tail) > _TAIL_BYTES else tail

    def answered(self, model: str, replica: str, body: bytes | None, usage: bytes | None = None) -> None:
        """The answer came from `replica` of `model`; `body` (a whole answer's; None for
        a stream, read from what `saw` kept and its `usage` event's JSON) says the rest."""
        if body is not None:
            read = genai.from_answer(body)
        else:
            read = genai.from_stream_tail(self._tail)
            if usage is not None:
                read.update(genai.from_answer(usage))
        self.span.set_attributes({"llmgw.model": model, "llmgw.replica": replica, **read})

    def end(self, status: int | None) -> None:
        """Ends the request's span with the HTTP status it was answered with (None: the
        client left first). A 5xx is an error of the server span; a 4xx is the client's."""
        span = self.span
        if status is not None:
            span.set_attribute("http.response.status_code", status)
            if status >= 500:
                span.set_status(Status(StatusCode.ERROR))
        span.end()
