"""Adapters on llama-server, which knows them only by number: through a real gateway
process, a request for an adapter reaches the replica with `lora: [{id, scale}]`, and a
client's own `lora` never does. The replica is a stand-in on loopback that keeps the
bodies it is sent and answers a fixed completion."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from llmgw.testing.server import GatewayProcess, start_gateway
from support.clients import ClientFactory

ANSWER = {
    "id": "x",
    "object": "chat.completion",
    "created": 1,
    "model": "small",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
}


class Replica(http.server.ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.bodies: list[dict[str, Any]] = []


class _Handler(http.server.BaseHTTPRequestHandler):
    server: Replica

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", 0))
        self.server.bodies.append(json.loads(self.rfile.read(length)))
        self._send(200, json.dumps(ANSWER).encode())

    def do_GET(self) -> None:
        self._send(404, b"")

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return None


@pytest.fixture(scope="module")
def replica() -> Iterator[Replica]:
    server = Replica()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def gateway(replica: Replica) -> Iterator[GatewayProcess]:
    url = f"http://127.0.0.1:{replica.server_address[1]}"
    config = {
        "endpoints": [
            {"id": "llama-1", "url": url, "models": ["small"], "engine": "llamacpp", "lora_ids": {"sql": 1}}
        ],
        "models": [
            {
                "name": "small",
                "description": "A llama-server stand-in.",
                "adapters": [
                    {"name": "legal", "source": "/adapters/legal.gguf"},
                    {"name": "sql", "source": "/adapters/sql.gguf", "scale": 0.5},
                ],
            }
        ],
    }
    handle = start_gateway(config)
    try:
        yield handle
    finally:
        handle.stop()


def test_an_adapter_request_names_the_adapter_by_its_number(
    make_client: ClientFactory, gateway: GatewayProcess, replica: Replica
) -> None:
    replica.bodies.clear()
    make_client(gateway).chat.completions.create(
        model="sql", messages=[{"role": "user", "content": "hi"}], max_tokens=3
    )
    [sent] = replica.bodies
    assert sent["lora"] == [{"id": 1, "scale": 0.5}]  # the adapter's own scale


def test_a_clients_own_lora_never_reaches_the_replica(
    make_client: ClientFactory, gateway: GatewayProcess, replica: Replica
) -> None:
    replica.bodies.clear()
    make_client(gateway).chat.completions.create(
        model="small",
        messages=[{"role": "user", "content": "hi"}],
        max_tokens=3,
        extra_body={"lora": [{"id": 0, "scale": 1.0}]},
    )
    [sent] = replica.bodies
    assert "lora" not in sent
