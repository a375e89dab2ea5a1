"""The gateway's own Python cost per request, without sockets: `GatewayApp` called
with an in-memory client request and an in-memory replica that answers at once.

What it measures is everything llmgw's code does for one request (parse, resolve,
pick, build the upstream request, relay, account), not the HTTP server's work nor the
kernel's; compare with `overhead.py` for the whole.

    .venv/bin/python bench/router/micro_request_path.py [--stream] [--prefix] [--no-admission] [-n 20000]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import uvloop

from llmgw.config import settings_from_mapping
from llmgw.server.gateway import Gateway

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
        self.headers = [(b"content-type", b"application/json")]
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

    def __init__(self, body: bytes) -> None:
        self.headers = FakeHeaders({"content-length": str(len(body))})


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


async def main(count: int, stream: bool, prefix: bool, admission: bool = True) -> None:
    settings = settings_from_mapping(
        {
            "endpoints": [
                {"id": f"r{i}", "url": f"http://127.0.0.1:{9000 + i}", "models": ["m"]} for i in range(8)
            ],
            "router": {"prefix": {"enabled": prefix}, "admission": {"enabled": admission}},
        },
        source="bench",
        environ={},
    )
    gateway = Gateway(settings)
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
    app = gateway.app
    for i in range(2000):
        body = bodies[i % 256]
        await app(FakeScope(body), FakeProto(body))  # type: ignore[arg-type]
    started = time.perf_counter()
    for i in range(count):
        body = bodies[i % 256]
        await app(FakeScope(body), FakeProto(body))  # type: ignore[arg-type]
    elapsed = time.perf_counter() - started
    gateway.usage.drain()
    print(
        f"{'stream' if stream else 'non-stream'} prefix={'on' if prefix else 'off'} "
        f"admission={'on' if admission else 'off'}: "
        f"{elapsed / count * 1e6:.1f} µs per request over {count}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", type=int, default=20000)
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--prefix", action="store_true")
    parser.add_argument("--no-admission", action="store_true")
    args = parser.parse_args()
    uvloop.run(main(args.n, args.stream, args.prefix, not args.no_admission))
