"""Whether a server traces, and building its tracing: the one place that decides it.

A server with tracing on gets one OpenTelemetry SDK `TracerProvider` of its own (never
the process's global one, so two gateways in one test process do not share spans),
built by `llmgw.obs.provider`. With no endpoint (here, in OTEL_EXPORTER_OTLP_ENDPOINT or
in OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), or with OTEL_SDK_DISABLED=true, `build_traces`
returns None and nothing of OpenTelemetry is imported: the request path then pays one
`is None` test per step, and the `llmgw` command never loads the SDK.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from llmgw.config.observability import Tracing

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter

    from llmgw.obs.provider import Traces

# The variables that name a collector when the file does not.
_ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


def enabled(settings: Tracing, environ: Mapping[str, str]) -> bool:
    """Whether traces are exported: an endpoint is named here or in the standard
    variables, and the SDK is not turned off by OTEL_SDK_DISABLED."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return bool(settings.effective_endpoint(environ) or environ.get(_ENDPOINT_VARIABLES[0]))


def build_traces(
    settings: Tracing, environ: Mapping[str, str], span_exporter: SpanExporter | None = None
) -> Traces | None:
    """The server's tracing, or None when it is off (nothing imported). A test passes
    `span_exporter` to see the spans, which turns tracing on without an endpoint."""
    if span_exporter is None and not enabled(settings, environ):
        return None
    from llmgw.obs.provider import Traces, provider, root_bound  # noqa: PLC0415 (the SDK only when on)

    return Traces(provider(settings, environ, span_exporter), root_bound(settings, environ))
