"""Sim engines and a gateway in front of them, as real processes on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from llmgw.server.testing import GatewayProcess, start_gateway
from llmgw.sim.testing import SimEngineProcess, start_sim_engine

# Fast sims: the tests are about the gateway, not about waiting for tokens.
FAST = ("--decode-ms", "1", "--prefill-ms-per-token", "0.01", "--default-max-tokens", "12")


def sim(*args: str) -> SimEngineProcess:
    return start_sim_engine(*FAST, *args)


def set_fault(engine: SimEngineProcess, mode: str, **extra: Any) -> None:
    response = httpx.post(engine.admin_url + "/sim/fault", json={"mode": mode, **extra}, timeout=5)
    response.raise_for_status()


def sim_state(engine: SimEngineProcess) -> dict[str, Any]:
    response = httpx.get(engine.admin_url + "/sim/state", timeout=5)
    response.raise_for_status()
    state: dict[str, Any] = response.json()
    return state


def endpoint(eid: str, engine: SimEngineProcess, *models: str, **extra: Any) -> dict[str, Any]:
    return {"id": eid, "url": engine.url, "models": list(models), "engine": "sim", **extra}


@pytest.fixture(scope="module")
def two_sims() -> Iterator[tuple[SimEngineProcess, SimEngineProcess]]:
    a = sim("--model", "chat-model", "--adapter", "chat-lora")
    b = sim("--model", "chat-model", "--adapter", "chat-lora")
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
    }
    handle = start_gateway(config)
    try:
        yield handle
    finally:
        handle.stop()
