"""A gateway's spans as the OpenTelemetry SDK's in-memory exporter sees them: the gateway
runs in this process (so the exporter is at hand) and is called through a real socket;
the replicas are sim engines, as processes, one of them failing with 503 so the
request is retried on the other."""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import orjson
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from llmgw.config import settings_from_mapping
from llmgw.obs.tracing import build_traces
from llmgw.server.gateway import Gateway
from llmgw.server.runner import listeners
from llmgw.testing.sim import SimEngineProcess
from support.sims import endpoint, set_fault, sim, sim_state

CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
Pair = tuple[SimEngineProcess, SimEngineProcess]


@pytest.fixture
def pair() -> Iterator[Pair]:
    a, b = sim("--model", "m"), sim("--model", "m")
    try:
        yield a, b
    finally:
        a.stop()
        b.stop()


@contextlib.asynccontextmanager
async def traced_gateway(document: dict[str, Any], exporter: InMemorySpanExporter) -> AsyncIterator[str]:
    """The gateway of `document` on a free loopback port, its spans going to `exporter`
    (flushed when the block ends); yields its base URL."""
    document = {**document, "listen": "127.0.0.1:0", "admin_listen": "127.0.0.1:0"}
    settings = settings_from_mapping(document, source="test", environ={})
    traces = build_traces(settings.tracing, {}, exporter)
    assert traces is not None
    gateway = Gateway(settings, traces=traces)
    servers = listeners(settings, gateway)
    for server in servers:
        await server.start()
    background = await gateway.background()
    try:
        yield f"http://127.0.0.1:{servers[0].port}"
    finally:
        for server in servers:
            await server.stop(5)
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        gateway.close()
        # The pools' connections close on the loop's next turns: let them, before it ends.
        for _ in range(3):
            await asyncio.sleep(0)
        await asyncio.to_thread(traces.close)


def two_replicas(a: SimEngineProcess, b: SimEngineProcess, **tracing: Any) -> dict[str, Any]:
    # `a` ranks first (a higher priority tier), so it is tried first and fails.
    return {
        "endpoints": [endpoint("a", a, "m", priority=1), endpoint("b", b, "m")],
        "router": {"default_profile": "least_load", "retries": 1},
        "tracing": tracing,
    }


async def stream_chat(base: str, headers: dict[str, str]) -> tuple[int, list[dict[str, Any]]]:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True, "max_tokens": 4}
    async with (
        httpx.AsyncClient(timeout=20) as client,
        client.stream("POST", base + "/v1/chat/completions", json=body, headers=headers) as response,
    ):
        raw = b"".join([part async for part in response.aiter_bytes()])
    events = [
        orjson.loads(line[len(b"data: ") :]) for line in raw.split(b"\n") if line.startswith(b"data: {")
    ]
    return response.status_code, events


def named(spans: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.span_id)


def parent_id(span: ReadableSpan) -> int | None:
    return None if span.parent is None else span.parent.span_id


def test_a_streamed_request_retried_on_another_replica_is_one_trace_continuing_the_clients(
    pair: Pair,
) -> None:
    a, b = pair
    set_fault(a, "503")
    exporter = InMemorySpanExporter()

    async def run() -> tuple[int, list[dict[str, Any]]]:
        async with traced_gateway(two_replicas(a, b), exporter) as base:
            return await stream_chat(base, {"traceparent": f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"})

    status, events = asyncio.run(run())
    assert status == 200
    spans = list(exporter.get_finished_spans())
    assert {s.context.trace_id for s in spans if s.context is not None} == {int(CLIENT_TRACE, 16)}

    (server,) = named(spans, "POST /v1/chat/completions")
    assert server.kind is SpanKind.SERVER
    assert server.parent is not None
    assert server.parent.is_remote
    assert server.parent.span_id == int(CLIENT_SPAN, 16)
    attributes = dict(server.attributes or {})
    assert attributes["http.response.status_code"] == 200
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.request.model"] == "m"
    assert attributes["gen_ai.response.model"] == "m"
    assert attributes["llmgw.replica"] == "b"
    reasons = tuple(
        choice["finish_reason"] for event in events for choice in event["choices"] if choice["finish_reason"]
    )
    assert attributes["gen_ai.response.finish_reasons"] == reasons
    assert reasons
    assert isinstance(attributes["gen_ai.usage.input_tokens"], int)
    assert attributes["gen_ai.usage.output_tokens"] == 4

    first_pick, second_pick = sorted(named(spans, "pick"), key=lambda s: s.start_time or 0)
    failed, served = sorted(named(spans, "upstream"), key=lambda s: s.start_time or 0)
    for child in (first_pick, second_pick, failed, served):
        assert parent_id(child) == span_id(server)
    assert (first_pick.attributes or {})["llmgw.replica"] == "a"
    assert (first_pick.attributes or {})["llmgw.pick.reason"] == "load"
    assert (second_pick.attributes or {})["llmgw.replica"] == "b"
    assert (second_pick.attributes or {})["llmgw.pick.reason"] == "only"

    assert failed.kind is SpanKind.CLIENT
    failed_attributes = dict(failed.attributes or {})
    assert failed_attributes["llmgw.replica"] == "a"
    assert failed_attributes["llmgw.attempt"] == 1
    assert failed_attributes["http.response.status_code"] == 503
    assert failed.status.status_code is StatusCode.ERROR
    assert [e.name for e in failed.events][:2] == ["connected", "headers"]

    assert (served.attributes or {})["llmgw.replica"] == "b"
    assert (served.attributes or {})["llmgw.attempt"] == 2
    assert served.status.status_code is StatusCode.UNSET
    assert [e.name for e in served.events] == ["connected", "headers", "first_byte"]
    # The stream is the try's: its span ends once the last event has been relayed.
    assert served.end_time is not None
    assert server.end_time is not None
    assert served.end_time <= server.end_time

    # Each replica was handed the context of the try made on it.
    assert sim_state(a)["last_traceparent"] == f"00-{CLIENT_TRACE}-{span_id(failed):016x}-01"
    assert sim_state(b)["last_traceparent"] == f"00-{CLIENT_TRACE}-{span_id(served):016x}-01"


def test_an_unsampled_request_records_nothing_and_passes_the_clients_context_on(pair: Pair) -> None:
    a, b = pair
    exporter = InMemorySpanExporter()
    parent = f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-00"  # the client did not sample it

    async def run() -> int:
        async with traced_gateway(two_replicas(a, b, sample_ratio=0.0), exporter) as base:
            status, _ = await stream_chat(base, {"traceparent": parent, "tracestate": "vendor=x"})
            return status

    assert asyncio.run(run()) == 200
    assert exporter.get_finished_spans() == ()
    assert sim_state(a)["last_traceparent"] == parent


def test_the_model_listing_is_a_server_span_of_its_own(pair: Pair) -> None:
    a, b = pair
    exporter = InMemorySpanExporter()

    async def run() -> int:
        async with (
            traced_gateway(two_replicas(a, b), exporter) as base,
            httpx.AsyncClient(timeout=10) as client,
        ):
            return (await client.get(base + "/v1/models/m")).status_code

    assert asyncio.run(run()) == 200
    (listing,) = exporter.get_finished_spans()
    assert listing.name == "GET /v1/models/{model}"
    assert listing.kind is SpanKind.SERVER
    assert (listing.attributes or {})["url.path"] == "/v1/models/m"
    assert (listing.attributes or {})["http.response.status_code"] == 200


def test_guard_checks_and_their_judge_calls_are_steps_of_the_request() -> None:
    echo = sim("--model", "chat-model", "--echo", "--default-max-tokens", "400")
    judge = sim("--model", "judge", "--judge", "llamaguard3")
    check = {"type": "model", "model": "judge", "stage": "both", "action": "block", "timeout": "5s"}
    document = {
        "endpoints": [endpoint("echo", echo, "chat-model"), endpoint("judge", judge, "judge")],
        "models": [
            {"name": "chat-model"},
            {"name": "judge", "role": "guard", "guard": {"format": "llamaguard3"}, "scaling": {"min": 1}},
        ],
        "guard": {"default": "judged", "policies": [{"name": "judged", "checks": [check]}]},
    }
    exporter = InMemorySpanExporter()

    async def run() -> int:
        async with (
            traced_gateway(document, exporter) as base,
            httpx.AsyncClient(timeout=20) as client,
        ):
            body = {"model": "chat-model", "messages": [{"role": "user", "content": "a kind question"}]}
            return (await client.post(base + "/v1/chat/completions", json=body)).status_code

    try:
        assert asyncio.run(run()) == 200
        judge_state = sim_state(judge)
    finally:
        echo.stop()
        judge.stop()
    spans = list(exporter.get_finished_spans())
    (server,) = named(spans, "POST /v1/chat/completions")
    (checked_in,) = named(spans, "guard.input")
    (checked_out,) = named(spans, "guard.output")
    assert parent_id(checked_in) == span_id(server)
    assert parent_id(checked_out) == span_id(server)
    asked_in, asked_out = sorted(named(spans, "guard.judge"), key=lambda s: s.start_time or 0)
    assert parent_id(asked_in) == span_id(checked_in)
    assert parent_id(asked_out) == span_id(checked_out)
    for asked in (asked_in, asked_out):
        assert asked.kind is SpanKind.CLIENT
        assert (asked.attributes or {})["gen_ai.request.model"] == "judge"
        assert (asked.attributes or {})["http.response.status_code"] == 200
    # The judge's engine continues the trace from the call made on it.
    assert server.context is not None
    trace_id = f"{server.context.trace_id:032x}"
    assert judge_state["last_traceparent"].split("-")[1:3] == [trace_id, f"{span_id(asked_out):016x}"]


@pytest.fixture(autouse=True)
def _collect() -> Iterator[None]:
    """Each test's own gateway must leave no socket open: collected here, a leak is
    reported against the test that made it rather than whichever runs next."""
    yield
    gc.collect()
