"""Adapters loaded on demand (`max_loaded_adapters`), through a real gateway process in
front of two sims that load adapters at run time as vLLM does (`--max-loras 2`).

Six adapters over two replicas of two slots each: the router must load an adapter
before sending a request for it, never twice on one replica at once (the sim counts a
second load as `double_loads`), never past the slots (`refused_full`), and unload to
make room; every answer names the adapter asked for."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from llmgw.testing.server import GatewayProcess, start_gateway
from llmgw.testing.sim import SimEngineProcess
from support.sims import endpoint, sim, sim_state

ADAPTERS = [f"lora-{i}" for i in range(6)]


@pytest.fixture(scope="module")
def sims() -> Iterator[tuple[SimEngineProcess, SimEngineProcess]]:
    a = sim("--model", "base", "--max-loras", "2")
    try:
        b = sim("--model", "base", "--max-loras", "2")
    except BaseException:
        a.stop()
        raise
    try:
        yield a, b
    finally:
        a.stop()
        b.stop()


@pytest.fixture(scope="module")
def gateway(sims: tuple[SimEngineProcess, SimEngineProcess]) -> Iterator[GatewayProcess]:
    a, b = sims
    config = {
        "endpoints": [endpoint("sim-a", a, "base"), endpoint("sim-b", b, "base")],
        "models": [
            {
                "name": "base",
                "description": "A base model whose adapters load on demand.",
                "max_loaded_adapters": 2,
                "adapters": [{"name": name, "source": f"/adapters/{name}"} for name in ADAPTERS],
            }
        ],
    }
    handle = start_gateway(config)
    try:
        yield handle
    finally:
        handle.stop()


def _ask(gateway: GatewayProcess, model: str) -> dict[str, Any]:
    response = httpx.post(
        gateway.base_url + "/chat/completions",
        json={"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4},
        timeout=20,
    )
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def test_adapters_load_on_demand_once_and_make_room(
    gateway: GatewayProcess, sims: tuple[SimEngineProcess, SimEngineProcess]
) -> None:
    # Concurrent first requests for one adapter: loaded once per replica at most.
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: _ask(gateway, ADAPTERS[0]), range(16)))
    assert {a["model"] for a in answers} == {ADAPTERS[0]}
    # Every adapter in turn, three rounds: six adapters do not fit in four slots.
    for _ in range(3):
        for name in ADAPTERS:
            assert _ask(gateway, name)["model"] == name
    states = [sim_state(s)["lora"] for s in sims]
    for lora in states:
        assert lora["double_loads"] == 0
        assert lora["refused_full"] == 0
        assert lora["peak"] <= 2
        assert len(lora["held"]) <= 2
    assert sum(lora["unloads"] for lora in states) >= 1
    loaded = set().union(*(set(lora["loads"]) for lora in states))
    assert loaded == set(ADAPTERS)
    # The base model itself is served as before.
    assert _ask(gateway, "base")["model"] == "base"


def test_an_adapter_a_replica_lost_is_loaded_again(
    gateway: GatewayProcess, sims: tuple[SimEngineProcess, SimEngineProcess]
) -> None:
    name = ADAPTERS[1]
    assert _ask(gateway, name)["model"] == name
    # Unloaded behind the router's back, as a restart would: the next request's 404 makes
    # the router forget it there, and the answer still comes.
    for s in sims:
        if name in sim_state(s)["lora"]["held"]:
            unloaded = httpx.post(s.url + "/v1/unload_lora_adapter", json={"lora_name": name}, timeout=5)
            unloaded.raise_for_status()
    assert _ask(gateway, name)["model"] == name
    assert any(name in sim_state(s)["lora"]["held"] for s in sims)
