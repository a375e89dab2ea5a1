"""Building a server's tracing from `tracing:` and the OTEL_* variables: off unless a
collector is named (and then nothing of OpenTelemetry is loaded), the sampler's ratio
with a client's decision kept, the protocol's exporter, and the variables the file
leaves to the SDK."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import TraceIdRatioBased

from llmgw.config.observability import Tracing
from llmgw.obs.provider import Traces, exporter, http_endpoint
from llmgw.obs.tracing import build_traces, enabled

CLIENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-"


@pytest.fixture
def built() -> Iterator[list[Traces]]:
    """Traces a test builds, closed after it."""
    made: list[Traces] = []
    yield made
    for traces in made:
        traces.close()


def traced(made: list[Traces], environ: dict[str, str] | None = None, **settings: Any) -> Traces:
    traces = build_traces(Tracing(**settings), environ or {}, InMemorySpanExporter())
    assert traces is not None
    made.append(traces)
    return traces


def sampled(traces: Traces, headers: dict[str, str] | None = None, count: int = 200) -> int:
    """How many of `count` requests are recorded."""
    recorded = 0
    for i in range(count):
        route = "/v1/chat/completions"
        trace = traces.spans.request("POST", route, route, headers or {}, str(i))
        if trace is not None:
            recorded += 1
            trace.end(200)
    return recorded


def test_tracing_is_off_without_a_collector_and_builds_nothing() -> None:
    assert build_traces(Tracing(), {}) is None
    assert not enabled(Tracing(sample_ratio=1.0, service_name="x"), {})


@pytest.mark.parametrize(
    "environ",
    [
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317"},
        {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4317"},
    ],
)
def test_the_standard_variables_name_a_collector(environ: dict[str, str]) -> None:
    assert enabled(Tracing(), environ)


def test_the_sdk_switch_turns_it_off_whatever_the_file_says() -> None:
    settings = Tracing(endpoint="collector:4317")
    assert enabled(settings, {})
    assert not enabled(settings, {"OTEL_SDK_DISABLED": "true"})
    assert build_traces(settings, {"OTEL_SDK_DISABLED": "TRUE"}) is None


def test_a_server_with_tracing_off_never_imports_opentelemetry() -> None:
    probe = (
        "import sys\n"
        "from llmgw.config import settings_from_mapping\n"
        "from llmgw.server.gateway import Gateway\n"
        "import llmgw.server.runner\n"
        "settings = settings_from_mapping({'endpoints': [{'id': 'r', 'url': 'http://127.0.0.1:9', "
        "'models': ['m']}]}, source='probe', environ={})\n"
        "gateway = Gateway(settings)\n"
        "print(gateway.spans, any(n.startswith('opentelemetry') for n in sys.modules))\n"
        "gateway.close()\n"
    )
    answer = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    ).stdout.split()
    assert answer == ["None", "False"]


def test_the_ratio_samples_new_traces_and_a_clients_decision_is_kept(built: list[Traces]) -> None:
    never = traced(built, sample_ratio=0.0)
    always = traced(built, sample_ratio=1.0)
    assert sampled(never) == 0
    assert sampled(always) == 200
    # ParentBased: a client that sampled its trace gets it recorded at ratio 0, and one
    # that did not gets nothing at ratio 1.
    assert sampled(never, {"traceparent": CLIENT + "01"}) == 200
    assert sampled(always, {"traceparent": CLIENT + "00"}) == 0
    assert never.provider.sampler.get_description().startswith("ParentBased{root:TraceIdRatioBased{0.0}")


def test_a_ratio_between_samples_about_that_share(built: list[Traces]) -> None:
    # TraceIdRatioBased decides on random trace ids: 2000 draws at 0.25 land within
    # 0.15-0.35 except with a probability far below one in a billion.
    assert 300 < sampled(traced(built, sample_ratio=0.25), count=2000) < 700


def test_the_variables_apply_where_the_file_is_silent(
    built: list[Traces], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The SDK reads them from the process's environment, as the server passes it.
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_off")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "from-env")
    environ = dict(os.environ)
    silent = traced(built, environ)
    assert sampled(silent) == 0
    assert silent.provider.resource.attributes["service.name"] == "from-env"
    spoken = traced(built, environ, sample_ratio=1.0, service_name="from-file")
    assert sampled(spoken) == 200
    assert spoken.provider.resource.attributes["service.name"] == "from-file"


def test_the_protocol_chooses_the_exporter() -> None:
    over_http = exporter(Tracing(endpoint="http://127.0.0.1:4318", protocol="http"))
    over_grpc = exporter(Tracing(endpoint="127.0.0.1:4317", insecure=True))
    kinds = type(over_http), type(over_grpc)
    over_http.shutdown()
    over_grpc.shutdown()
    assert kinds == (HttpExporter, GrpcExporter)


def test_insecure_decides_the_grpc_channel_where_the_endpoint_has_no_scheme() -> None:
    # The exporter has no public accessor for it; its channel is built from this.
    plain = exporter(Tracing(endpoint="127.0.0.1:4317", insecure=True))
    tls = exporter(Tracing(endpoint="127.0.0.1:4317"))
    try:
        assert plain._insecure is True  # type: ignore[attr-defined]
        assert tls._insecure is False  # type: ignore[attr-defined]
    finally:
        plain.shutdown()
        tls.shutdown()


@pytest.mark.parametrize(
    ("given", "url"),
    [
        ("http://collector:4318", "http://collector:4318/v1/traces"),
        ("https://collector:4318/", "https://collector:4318/v1/traces"),
        ("http://gateway.example/otlp/v1/traces", "http://gateway.example/otlp/v1/traces"),
    ],
)
def test_the_http_endpoint_gets_the_traces_path_when_it_has_none(given: str, url: str) -> None:
    assert http_endpoint(given) == url


def test_the_request_paths_draw_is_the_trace_id_the_sampler_judged() -> None:
    # A new trace is decided on before any span exists (one draw); the span then gets
    # the drawn id, so what was kept is what TraceIdRatioBased itself keeps.
    exporter = InMemorySpanExporter()
    traces = build_traces(Tracing(sample_ratio=0.25), {}, exporter)
    assert traces is not None
    assert sampled(traces, count=400) > 0
    traces.close()
    bound = TraceIdRatioBased.get_bound_for_rate(0.25)
    ids = [span.context.trace_id for span in exporter.get_finished_spans() if span.context is not None]
    assert ids
    assert all(trace_id & TraceIdRatioBased.TRACE_ID_LIMIT < bound for trace_id in ids)
    assert len(set(ids)) == len(ids)
