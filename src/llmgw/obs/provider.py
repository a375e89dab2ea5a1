"""The OpenTelemetry SDK objects a tracing server owns, from `tracing:` and OTEL_*.

A ParentBased(TraceIdRatioBased(sample_ratio)) sampler, so a client's sampled trace is
kept whatever the ratio and its unsampled one is not started here; a BatchSpanProcessor
that exports over OTLP (grpc or http) in the SDK's own thread, off the event loop; and
`Traces.close()`, which flushes and shuts it all down when the server stops. Imported
only once tracing is on (`llmgw.obs.tracing.build_traces`).

What the file leaves unset, the SDK reads from the standard variables: the exporter's
headers, certificate, timeout and compression (OTEL_EXPORTER_OTLP_*), the batch
processor's sizes and delays (OTEL_BSP_*), resource attributes (OTEL_RESOURCE_ATTRIBUTES),
and, when `sample_ratio` and `service_name` are not in the file, OTEL_TRACES_SAMPLER(_ARG)
and OTEL_SERVICE_NAME.
"""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.trace.sampling import ParentBased, Sampler, TraceIdRatioBased

from llmgw.config.observability import Tracing
from llmgw.obs.spans import Spans

_SAMPLER_VARIABLE = "OTEL_TRACES_SAMPLER"
_SERVICE_VARIABLE = "OTEL_SERVICE_NAME"
_TRACES_PATH = "/v1/traces"
# Milliseconds the stop waits for the last spans to reach the collector.
_FLUSH_MS = 5000


def http_endpoint(endpoint: str) -> str:
    """The OTLP/HTTP URL for traces: `/v1/traces` added to a base URL that has no path."""
    base = endpoint.rstrip("/")
    scheme, _, rest = base.partition("://")
    return base if "/" in rest else f"{scheme}://{rest}{_TRACES_PATH}"


def exporter(settings: Tracing) -> SpanExporter:
    """The OTLP exporter for `settings.protocol`. The endpoint given here wins; without
    one the exporter reads OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT itself (and, over http,
    adds /v1/traces to the general one). Empty headers leave OTEL_EXPORTER_OTLP_HEADERS
    in force; `insecure` false leaves the grpc channel's TLS to the URL's scheme and
    OTEL_EXPORTER_OTLP_INSECURE."""
    headers = dict(settings.headers) or None
    if settings.protocol == "http":
        endpoint = http_endpoint(settings.endpoint) if settings.endpoint else None
        return HttpExporter(endpoint=endpoint, headers=headers)
    return GrpcExporter(
        endpoint=settings.endpoint or None, insecure=True if settings.insecure else None, headers=headers
    )


def sampler(settings: Tracing, environ: Mapping[str, str]) -> Sampler | None:
    """ParentBased(TraceIdRatioBased(sample_ratio)); None (the SDK reads
    OTEL_TRACES_SAMPLER) where the file leaves the ratio at its default and the
    variable is set."""
    if "sample_ratio" not in settings.model_fields_set and environ.get(_SAMPLER_VARIABLE):
        return None
    return ParentBased(TraceIdRatioBased(settings.sample_ratio))


class DrawnIds(RandomIdGenerator):
    """The SDK's random ids, except that the trace id the request path drew for a new
    trace, to decide on sampling before starting anything, is the one its span gets
    (`Spans.request`): the sampler then sees the id the decision was made on."""

    def __init__(self) -> None:
        self.drawn = 0

    def generate_trace_id(self) -> int:
        drawn = self.drawn
        if drawn:
            self.drawn = 0
            return drawn
        return super().generate_trace_id()


def provider(
    settings: Tracing, environ: Mapping[str, str], span_exporter: SpanExporter | None = None
) -> TracerProvider:
    """A provider of this server's own, exporting through `span_exporter` (a test's
    in-memory one) or the OTLP exporter `settings` describe, in batches."""
    attributes: dict[str, str] = {}
    if "service_name" in settings.model_fields_set or not environ.get(_SERVICE_VARIABLE):
        attributes[SERVICE_NAME] = settings.service_name
    built = TracerProvider(
        sampler=sampler(settings, environ),
        resource=Resource.create(attributes),
        shutdown_on_exit=False,
        id_generator=DrawnIds(),
    )
    built.add_span_processor(BatchSpanProcessor(span_exporter or exporter(settings)))
    return built


def root_bound(settings: Tracing, environ: Mapping[str, str]) -> int | None:
    """The bound under which a new trace's id (its low 64 bits) is sampled, as
    TraceIdRatioBased decides; None where the SDK's sampler comes from OTEL_TRACES_SAMPLER
    (then every request asks it)."""
    if sampler(settings, environ) is None:
        return None
    return TraceIdRatioBased.get_bound_for_rate(settings.sample_ratio)


class Traces:
    """A server's tracer provider and the span helpers its roles are given; `close`
    exports what is left and stops the exporter's thread."""

    def __init__(self, owned: TracerProvider, bound: int | None = None) -> None:
        self.provider = owned
        ids = owned.id_generator
        self.spans = Spans(
            owned.get_tracer("llmgw"), ids if isinstance(ids, DrawnIds) and bound is not None else None, bound
        )

    def close(self) -> None:
        """Flushes the spans still held, then shuts the provider down. Blocking (up to
        a few seconds): called once, off the loop, as the server stops."""
        self.provider.force_flush(_FLUSH_MS)
        self.provider.shutdown()
