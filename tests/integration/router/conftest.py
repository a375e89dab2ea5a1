"""Sim engines and a gateway in front of them, as real processes on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest

from llmgw.testing.server import GatewayProcess, free_port, start_gateway
from llmgw.testing.sim import SimEngineProcess
from support.clients import ClientFactory
from support.sims import endpoint, sim


@pytest.fixture(scope="module")
def two_sims() -> Iterator[tuple[SimEngineProcess, SimEngineProcess]]:
    a = sim("--model", "chat-model", "--adapter", "chat-lora")
    # The other replica serves vLLM's older metric names (gpu_cache_usage_perc), so the
    # gateway is seen reading both.
    b = sim("--model", "chat-model", "--adapter", "chat-lora", "--legacy-metrics")
    try:
        yield a, b
    finally:
        a.stop()
        b.stop()


@pytest.fixture(scope="module")
def gateway(two_sims: tuple[SimEngineProcess, SimEngineProcess]) -> Iterator[GatewayProcess]:
    a, b = two_sims
    config = {
        "endpoints": [endpoint("sim-a", a, "chat-model"), endpoint("sim-b", b, "chat-model")],
        "models": [
            {
                "name": "chat-model",
                "aliases": ["chat"],
                "description": "A simulated chat model for the gateway's tests.",
                "context_length": 2048,
                "max_output": 256,
                "capabilities": {"tools": True},
                "adapters": [{"name": "chat-lora", "source": "/adapters/chat-lora"}],
            }
        ],
        "router": {"max_body_bytes": 200_000, "prefix": {"enabled": True}},
        "metrics_listen": f"127.0.0.1:{free_port()}",
    }
    handle = start_gateway(config)
    try:
        yield handle
    finally:
        handle.stop()


@pytest.fixture
def make_client() -> Iterator[ClientFactory]:
    """Makes OpenAI clients for a gateway; closes them all when the test ends."""
    made: list[openai.OpenAI] = []

    def make(gateway: GatewayProcess) -> openai.OpenAI:
        client = openai.OpenAI(base_url=gateway.base_url, api_key="unused", max_retries=0, timeout=20)
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()
