"""The gateway's own Python cost per request, without sockets: `GatewayApp` called
with an in-memory client request and an in-memory replica that answers at once.

What it measures is everything llmgw's code does for one request (parse, resolve,
pick, build the upstream request, relay, account), not the HTTP server's work nor the
kernel's; compare with `overhead.py` for the whole.

With `--auth`, the gateway has auth on over a SQLite store holding the router
benchmark's tenancy (bench/router/auth_setup.py: a project key under a project, team and
org that each have RPM, TPM and a budget): every request is authenticated, judged and
recorded, every few hundred requests (`HAND_OVERS`) the usage sink hands its batch to the gate, and the timed
figure includes the usage writer emptying its buffer into the store at the end. The
gate's exchanges with the store (limits, spend, keys) are stopped: live they cost a
thousandth of a request, but they keep wall-clock intervals, so under callgrind they
would be counted fifty times over. The
time is the process's CPU time (all threads) per request, so that part of auth's cost is
counted too; compare it with the same run without `--auth`. Under
`valgrind --tool=callgrind` the instruction counts of the two do not depend on how busy
the machine is.

With `--log-format text|json` the process logs as `llmgw server --log-format` does, at
info, to /dev/null (the formatting and the write are counted, not a terminal's
drawing); with `--no-access-log` as well, `router.access_log` is off. Without either,
logging is left unconfigured, as in the figures recorded before the access log.

With `--tracing RATIO`, tracing is on at that `sample_ratio`: the server's own tracer
provider, its batch processor and a span exporter that encodes every batch as OTLP
protobuf and drops the bytes (the exporter's work but the network's), so the cost
counted is the request path's spans plus their export, in every thread.

    .venv/bin/python bench/router/micro_request_path.py [--stream] [--prefix] [--no-admission] \
        [--auth] [--guard] [--log-format json] [--no-access-log] [--tracing RATIO] [-n 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import logging
import os
import random
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import auth_setup
import uvloop
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from procs import BENCH_KEY

from llmgw.auth.gate import AuthGate
from llmgw.config import settings_from_mapping
from llmgw.obs.logs import install
from llmgw.obs.provider import Traces
from llmgw.obs.tracing import build_traces
from llmgw.server import heap
from llmgw.server.gateway import Gateway
from llmgw.store import Store

ANSWER = (
    b'{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,'
    b'"message":{"role":"assistant","content":"hello there"},"finish_reason":"stop"}],'
    b'"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}'
)
EVENT = (
    b'data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"tok"}}]}\n\n'
)
STREAM = [EVENT] * 20 + [
    b'data: {"id":"x","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":20,"total_tokens":25}}\n\n',
    b"data: [DONE]\n\n",
]


class FakeConn:
    def __init__(self, stream: bool) -> None:
        self.stream = stream
        self.closed = False
        self.reusable = True
        self.complete = True
        self.status = 200
        self.headers = [(b"content-type", b"text/event-stream" if stream else b"application/json")]
        self._chunks: list[bytes] = []

    async def exchange(self, head: bytes, body: bytes) -> int:
        self._chunks = list(STREAM) if self.stream else [ANSWER]
        return 200

    async def read_chunk(self) -> bytes | None:
        return self._chunks.pop(0) if self._chunks else None

    async def read_available(self) -> bytes | None:
        if not self._chunks:
            return None
        joined, self._chunks = b"".join(self._chunks), []
        return joined

    async def read_body(self) -> bytes:
        return b"".join(self._chunks)

    def close(self) -> None:
        self.closed = True

    def expire(self, error: Exception) -> None:
        self.closed = True


class FakePool:
    host_header = b"127.0.0.1:1"
    host = "127.0.0.1"
    port = 1

    def __init__(self, stream: bool) -> None:
        self.conn = FakeConn(stream)

    async def acquire(self, dial: float) -> tuple[FakeConn, bool]:
        return self.conn, True

    async def dial(self, dial: float) -> FakeConn:
        return self.conn

    def release(self, conn: FakeConn) -> None:
        pass


class FakeHeaders(dict[str, str]):
    pass


class FakeScope:
    proto = "http"
    method = "POST"
    path = "/v1/chat/completions"

    def __init__(self, body: bytes, authorization: str | None) -> None:
        self.headers = FakeHeaders({"content-length": str(len(body))})
        if authorization is not None:
            self.headers["authorization"] = authorization


class FakeTransport:
    async def send_bytes(self, data: bytes) -> None:
        pass


class FakeProto:
    def __init__(self, body: bytes) -> None:
        self.body = body

    async def __call__(self) -> bytes:
        return self.body

    def response_bytes(self, status: int, headers: Any, body: bytes) -> None:
        assert status == 200, body

    def response_stream(self, status: int, headers: Any, first: bytes = b"") -> FakeTransport:
        return FakeTransport()


class EncodingExporter(SpanExporter):
    """Encodes each batch as the OTLP exporters do, then drops it: the export's CPU
    without a collector."""

    def __init__(self) -> None:
        self.spans = 0
        self.bytes = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans += len(spans)
        self.bytes += len(encode_spans(spans).SerializeToString())
        return SpanExportResult.SUCCESS


HAND_OVERS = random.Random(6).choices(range(128, 385), k=64)
"""Requests per hand-over from the usage sink to the auth gate, in turn: 128 to 384,
about what the gateway drains at a time (every 50 ms) under the router benchmark's
load, and as uneven, so batches of usage records are of many sizes, as they are live.
Drawn once with a fixed seed, so every run (and every count) hands over alike."""


EXCHANGES = ("auth-refresh", "auth-limits", "auth-spend", "auth-prune")
"""The auth gate's background tasks other than the usage writer (gate.AuthGate.start)."""


@contextlib.asynccontextmanager
async def auth_gate(settings_for: dict[str, Any]) -> AsyncIterator[AuthGate]:
    """A started gate over a fresh SQLite store with the router benchmark's tenancy."""
    with tempfile.TemporaryDirectory() as tmp:
        location = str(Path(tmp) / "bench.db")
        await auth_setup.main(location)
        settings_for["auth"] = {
            "enabled": True,
            "store": location,
            "pricing": {"m": {"prompt_per_1k": 1000, "completion_per_1k": 2000}},
        }
        settings = settings_from_mapping(settings_for, source="bench", environ={})
        store = await Store.open(location)
        gate = AuthGate(settings, store)
        await gate.start()
        # The exchanges with the store keep wall-clock intervals: a few a second, so a
        # thousandth of a request's cost live, but under callgrind, fifty times slower,
        # they would run fifty times as often per request and vary the count by a few
        # thousand instructions a request. They are stopped; the usage writer is not.
        for task in asyncio.all_tasks():
            if task.get_name() in EXCHANGES:
                task.cancel()
        try:
            yield gate
        finally:
            await gate.close()
            await store.close()


# The default policy: personal data and secrets redacted on both stages.
GUARD = {
    "default": "default",
    "policies": [
        {
            "name": "default",
            "checks": [
                {"type": "pii", "stage": "both", "action": "redact"},
                {"type": "secrets", "stage": "both", "action": "redact"},
            ],
        }
    ],
}


async def main(
    count: int,
    stream: bool,
    prefix: bool,
    admission: bool = True,
    auth: bool = False,
    guard: bool = False,
    access_log: bool = True,
    tracing: float | None = None,
) -> None:
    mapping: dict[str, Any] = {
        "endpoints": [
            {"id": f"r{i}", "url": f"http://127.0.0.1:{9000 + i}", "models": ["m"]} for i in range(8)
        ],
        "router": {
            "prefix": {"enabled": prefix},
            "admission": {"enabled": admission},
            "access_log": access_log,
        },
    }
    if guard:
        mapping["guard"] = GUARD
    if tracing is not None:
        mapping["tracing"] = {"endpoint": "http://127.0.0.1:9", "protocol": "http", "sample_ratio": tracing}
    async with contextlib.AsyncExitStack() as stack:
        gate = await stack.enter_async_context(auth_gate(mapping)) if auth else None
        settings = settings_from_mapping(mapping, source="bench", environ={})
        exporter = EncodingExporter()
        traces = build_traces(settings.tracing, {}, exporter) if tracing is not None else None
        gateway = Gateway(settings, auth=gate, traces=traces)
        heap.settle()  # as `llmgw server` does once it is up
        await run(gateway, gate, count, stream, traces)
        if traces is not None:
            print(f"tracing={tracing}: {exporter.spans} spans exported, {exporter.bytes} bytes of OTLP")


async def run(
    gateway: Gateway, gate: AuthGate | None, count: int, stream: bool, traces: Traces | None = None
) -> None:
    for endpoint in gateway.endpoints.all():
        endpoint.pool = FakePool(stream)  # type: ignore[assignment]
    system = "You are a helpful assistant for the finance team. " * 20
    bodies = [
        (
            b'{"model":"m","stream":%s,"max_tokens":16,"messages":[{"role":"system","content":"%s"},'
            b'{"role":"user","content":"question number %d about the quarterly report"}]}'
        )
        % (b"true" if stream else b"false", system.encode(), i)
        for i in range(256)
    ]
    authorization = None if gate is None else f"Bearer {BENCH_KEY}"
    app = gateway.app

    hand_overs = itertools.cycle(HAND_OVERS)

    async def requests(n: int) -> None:
        until_hand_over = next(hand_overs)
        for i in range(n):
            body = bodies[i % 256]
            await app(FakeScope(body, authorization), FakeProto(body))  # type: ignore[arg-type]
            until_hand_over -= 1
            if not until_hand_over:
                gateway.usage.drain()
                await asyncio.sleep(0)  # the usage writer's turn, as the event loop gives it
                until_hand_over = next(hand_overs)
        gateway.usage.drain()
        if gate is not None:
            await gate.writer.settle(600)

    await requests(2000)
    if traces is not None:
        traces.provider.force_flush()
    cpu, started = time.process_time(), time.perf_counter()
    await requests(count)
    if traces is not None:
        traces.close()  # what the timed requests left in the batch is exported, and counted
    cpu, elapsed = time.process_time() - cpu, time.perf_counter() - started
    dropped = 0 if gate is None else gate.writer.counts.dropped
    router = gateway.settings.router
    print(
        f"{'stream' if stream else 'non-stream'} prefix={'on' if router.prefix.enabled else 'off'} "
        f"admission={'on' if router.admission.enabled else 'off'} "
        f"auth={'on' if gate is not None else 'off'} "
        f"guard={'on' if gateway.guard.active else 'off'} "
        f"tracing={'off' if traces is None else gateway.settings.tracing.sample_ratio}: "
        f"{cpu / count * 1e6:.1f} µs CPU per request ({elapsed / count * 1e6:.1f} µs wall) over {count}"
        + (f", usage records dropped: {dropped}" if gate is not None else "")
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", type=int, default=20000)
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--prefix", action="store_true")
    parser.add_argument("--no-admission", action="store_true")
    parser.add_argument("--auth", action="store_true", help="auth on: keys, limits, budgets, usage records")
    parser.add_argument("--guard", action="store_true", help="guard on: pii and secrets redacted, both ways")
    parser.add_argument(
        "--log-format", choices=("text", "json"), help="log at info to /dev/null, in this format"
    )
    parser.add_argument("--no-access-log", action="store_true", help="router.access_log off")
    parser.add_argument(
        "--tracing", type=float, metavar="RATIO", help="tracing on at this sample_ratio (0 to 1); off without"
    )
    args = parser.parse_args()
    if args.log_format:
        install(logging.INFO, args.log_format, open(os.devnull, "w"))  # noqa: SIM115 (open for the process's life)
    options = (not args.no_admission, args.auth, args.guard, not args.no_access_log, args.tracing)
    uvloop.run(main(args.n, args.stream, args.prefix, *options))
