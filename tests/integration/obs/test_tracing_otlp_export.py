"""`llmgw server` with `tracing: {endpoint, protocol: http}` exporting to an OTLP/HTTP
receiver on loopback (aiohttp, decoding `ExportTraceServiceRequest` as a collector
does): the spans arrive, with the service name and the configured headers, and the
trace the sim engine was handed is the one exported."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from llmgw.testing.server import start_gateway
from llmgw.testing.sim import SimEngineProcess
from support.sims import endpoint, sim, sim_state


class Received:
    """What the receiver was sent: each export's headers and decoded request."""

    def __init__(self) -> None:
        self.exports: list[tuple[dict[str, str], ExportTraceServiceRequest]] = []

    async def traces(self, request: web.Request) -> web.Response:
        export = ExportTraceServiceRequest()
        export.ParseFromString(await request.read())
        self.exports.append(({k.lower(): v for k, v in request.headers.items()}, export))
        return web.Response(
            body=ExportTraceServiceResponse().SerializeToString(), content_type="application/x-protobuf"
        )

    def spans(self) -> list[Span]:
        return [
            span
            for _, export in self.exports
            for resource in export.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        ]

    def services(self) -> set[str]:
        return {
            attribute.value.string_value
            for _, export in self.exports
            for resource in export.resource_spans
            for attribute in resource.resource.attributes
            if attribute.key == "service.name"
        }


def attributes(span: Span) -> dict[str, Any]:
    def value(kv: KeyValue) -> Any:
        kind = kv.value.WhichOneof("value")
        return getattr(kv.value, kind) if kind else None

    return {kv.key: value(kv) for kv in span.attributes}


@pytest.fixture
def engine() -> Iterator[SimEngineProcess]:
    process = sim("--model", "m")
    try:
        yield process
    finally:
        process.stop()


def test_a_server_exports_its_spans_over_otlp_http_to_a_collector(engine: SimEngineProcess) -> None:
    received = Received()

    async def run() -> int:
        app = web.Application()
        app.router.add_post("/v1/traces", received.traces)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        port = runner.addresses[0][1]
        config = {
            "endpoints": [endpoint("sim", engine, "m")],
            "tracing": {
                "endpoint": f"http://127.0.0.1:{port}",
                "protocol": "http",
                "service_name": "gw-under-test",
                "headers": {"x-collector-key": "k-123"},
            },
        }
        gateway = await asyncio.to_thread(start_gateway, config)
        try:
            async with httpx.AsyncClient(timeout=20) as client:
                answer = await client.post(
                    gateway.base_url + "/chat/completions",
                    json={"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3},
                )
        finally:
            # The server exports what it holds as it stops; the stop returns once it has.
            assert await asyncio.to_thread(gateway.stop) == 0, gateway.log()
            await runner.cleanup()
        return answer.status_code

    assert asyncio.run(run()) == 200
    assert received.exports
    assert all(headers.get("x-collector-key") == "k-123" for headers, _ in received.exports)
    assert received.services() == {"gw-under-test"}

    spans = received.spans()
    (server,) = [s for s in spans if s.name == "POST /v1/chat/completions"]
    assert server.kind == Span.SpanKind.SPAN_KIND_SERVER
    server_attributes = attributes(server)
    assert server_attributes["gen_ai.request.model"] == "m"
    assert server_attributes["gen_ai.usage.output_tokens"] == 3
    assert server_attributes["http.response.status_code"] == 200
    (upstream,) = [s for s in spans if s.name == "upstream"]
    assert upstream.kind == Span.SpanKind.SPAN_KIND_CLIENT
    assert upstream.parent_span_id == server.span_id
    assert upstream.trace_id == server.trace_id
    # The engine continues the trace from the try's span.
    version, trace_id, parent_id, flags = sim_state(engine)["last_traceparent"].split("-")
    assert (version, trace_id, parent_id) == ("00", upstream.trace_id.hex(), upstream.span_id.hex())
    assert int(flags, 16) & 1  # sampled (the SDK also sets W3C level 2's random-id flag)
