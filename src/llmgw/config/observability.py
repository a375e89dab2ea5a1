"""Where llmgw's history is read from (the dashboard's Prometheus) and where its traces
go (an OpenTelemetry collector).

Metrics are not configured here: llmgw publishes them on `metrics_listen` (or the admin
listener) and any Prometheus scrapes them. The dashboard reads the history back from
that Prometheus rather than keeping a second copy that would disagree with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from pydantic import Field, field_validator, model_validator

from llmgw.config.checks import Problem, refuse
from llmgw.config.values import NonNegativeDuration, OptionalHttpURL, Share, is_http_url, split_host_port
from llmgw.core.strict import Strict

DEFAULT_MONITORING_WINDOW = timedelta(hours=1)
DEFAULT_MONITORING_TIMEOUT = timedelta(seconds=5)
TRACING_PROTOCOLS: tuple[str, ...] = ("grpc", "http")
OTEL_ENDPOINT_VARIABLE = "OTEL_EXPORTER_OTLP_ENDPOINT"
LOG_FORMATS: tuple[str, ...] = ("text", "json")
"""How log lines are written: for a person (text) or a log pipeline (json)."""


def check_log_format(value: str) -> str:
    """`value` when it is a log format; ValueError saying the fix otherwise."""
    if value not in LOG_FORMATS:
        raise ValueError(f"{value!r} is not a log format: use text or json")
    return value


class Monitoring(Strict):
    """Prometheus server the dashboard queries for its history charts, served as
    `GET /api/history` on the admin API (llmgw.obs.history)."""

    prometheus: OptionalHttpURL = ""
    """Base URL, e.g. http://prometheus.internal:9090. Empty hides the charts."""
    window: NonNegativeDuration = timedelta(0)
    """Time span the charts cover; 0 is 1h."""
    timeout: NonNegativeDuration = timedelta(0)
    """Per-query deadline. Queries block page rendering, so a slow Prometheus is
    skipped rather than awaited (the answer says it timed out). 0 is 5s."""

    @property
    def effective_window(self) -> timedelta:
        return self.window or DEFAULT_MONITORING_WINDOW

    @property
    def effective_timeout(self) -> timedelta:
        return self.timeout or DEFAULT_MONITORING_TIMEOUT


class Tracing(Strict):
    """Export of OpenTelemetry traces over OTLP: a span per API request with its steps
    (auth, admission wait, pick, each upstream try, guard checks and judge calls) and,
    on a control plane, a span per reconcile pass and placement decision. Disabled
    until an endpoint is configured here or through OTEL_EXPORTER_OTLP_ENDPOINT (or
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT); the other OTEL_* variables the SDK reads apply
    where this section is silent. Acted on by `llmgw.obs.tracing`.
    """

    endpoint: str = ""
    """The collector: host:port or http(s)://host:port for grpc (4317), an http(s)://
    URL for http (4318, /v1/traces is added)."""
    protocol: str = "grpc"
    """grpc or http (OTLP over HTTP with protobuf)."""
    service_name: str = "llmgw"
    """service.name on every span; set one per cluster to tell them apart."""
    sample_ratio: Share = 1.0
    """Share of requests traced, 0 to 1; a trace already sampled upstream is kept."""
    headers: dict[str, str] = Field(default_factory=dict)
    """Sent with every export, like a collector's API key header."""
    insecure: bool = False
    """Plaintext to the collector. Without it a grpc endpoint is reached over TLS."""

    def effective_endpoint(self, environ: Mapping[str, str]) -> str:
        """This endpoint, or the standard variable's when none is set here."""
        return self.endpoint or environ.get(OTEL_ENDPOINT_VARIABLE, "")

    @field_validator("protocol")
    @classmethod
    def _known_protocol(cls, value: str) -> str:
        if value not in TRACING_PROTOCOLS:
            raise ValueError(f"{value!r} is not an OTLP protocol: use grpc or http")
        return value

    @field_validator("service_name")
    @classmethod
    def _named(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("is empty: traces need a service name, like llmgw")
        return value

    @model_validator(mode="after")
    def _endpoint_shape(self) -> Tracing:
        problems: list[Problem] = []
        endpoint = self.endpoint
        if endpoint and not is_http_url(endpoint):
            if self.protocol == "http":
                problems.append(
                    Problem(
                        ("endpoint",), f"{endpoint!r}: OTLP over http needs a URL, like http://collector:4318"
                    )
                )
            else:
                try:
                    split_host_port(endpoint)
                except ValueError:
                    problems.append(
                        Problem(
                            ("endpoint",), f"{endpoint!r} is neither host:port nor a URL, like collector:4317"
                        )
                    )
        if self.insecure and endpoint.startswith("https://"):
            problems.append(
                Problem(("insecure",), f"is true but {endpoint} asks for TLS: drop one of the two")
            )
        refuse("Tracing", problems)
        return self
