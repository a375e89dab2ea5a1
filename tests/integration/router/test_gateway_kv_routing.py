"""Exact KV-cache routing through a router-only gateway: two sims publish their cache
in vLLM's event format, and a prompt sharing a long prefix with one a sim already
holds goes to that sim. The prefix tree is off, so nothing but the KV index can steer."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from llmgw.testing.server import GatewayProcess, free_port, start_gateway
from llmgw.testing.sim import SimEngineProcess
from support.sims import endpoint, sim


@pytest.fixture(scope="module")
def kv_rig() -> Iterator[tuple[GatewayProcess, dict[str, SimEngineProcess]]]:
    ports = {"sim-a": free_port(), "sim-b": free_port()}
    _KV_PORTS.update(ports)
    sims = {eid: sim("--model", "m", "--kv-events-port", str(port)) for eid, port in ports.items()}
    config = {
        "endpoints": [
            endpoint(eid, process, "m", kv_events=f"tcp://127.0.0.1:{ports[eid]}")
            for eid, process in sims.items()
        ],
        "models": [{"name": "m", "context_length": 8192, "max_output": 64}],
        "router": {"prefix": {"enabled": False}},
    }
    try:
        gw = start_gateway(config)
        try:
            yield gw, sims
        finally:
            gw.stop()
    finally:
        for process in sims.values():
            process.stop()


_KV_PORTS: dict[str, int] = {}


def _messages(topic: int, question: str, repeats: int = 30) -> list[dict[str, Any]]:
    system = f"Briefing {topic}: you answer for desk {topic} of the shipping office. " * repeats
    return [{"role": "system", "content": system}, {"role": "user", "content": question}]


def _direct(process: SimEngineProcess, topic: int, repeats: int = 30) -> None:
    body = {"model": "m", "messages": _messages(topic, "first question", repeats), "max_tokens": 20}
    assert httpx.post(f"{process.url}/v1/chat/completions", json=body, timeout=10).status_code == 200


def _through(gw: GatewayProcess, topic: int) -> str:
    body = {"model": "m", "messages": _messages(topic, "a follow-up question"), "max_tokens": 2}
    response = httpx.post(f"{gw.url}/v1/chat/completions", json=body, timeout=10)
    assert response.status_code == 200
    return response.headers["x-llmgw-replica"]


def _warm(gw: GatewayProcess, process: SimEngineProcess, first: int) -> int:
    """A topic the gateway followed to `process`'s cache. Its subscribers join the sims'
    PUB sockets shortly after it starts, and events sent before that are lost: warm up
    until one lands, bounded."""
    for topic in range(first, first + 20):
        _direct(process, topic)
        if _through(gw, topic) == "sim-a":
            return topic
    pytest.fail("no request followed sim-a's cache in 20 tries")


def test_a_prompt_goes_to_the_replica_whose_cache_holds_its_prefix(
    kv_rig: tuple[GatewayProcess, dict[str, SimEngineProcess]],
) -> None:
    gw, sims = kv_rig
    topic = _warm(gw, sims["sim-a"], 0)
    # Now every prompt follows its holder; by load alone each would be a coin toss.
    for n in range(1, 9):
        holder = ("sim-a", "sim-b")[n % 2]
        _direct(sims[holder], topic + n)
        assert _through(gw, topic + n) == holder


def test_a_restarted_replica_is_not_credited_with_the_cache_it_lost(
    kv_rig: tuple[GatewayProcess, dict[str, SimEngineProcess]],
) -> None:
    gw, sims = kv_rig
    topic = _warm(gw, sims["sim-a"], 100)
    later = range(topic + 1, topic + 5)
    for t in later:
        _direct(sims["sim-a"], t)
    http_port = urlsplit(sims["sim-a"].url).port
    sims["sim-a"].stop()
    sims["sim-a"] = sim("--model", "m", "--kv-events-port", str(_KV_PORTS["sim-a"]), "--port", str(http_port))
    # sim-b now holds half of each prompt's system text; the old sim-a held all of it.
    # Still credited with that, sim-a would win every time; dropped, sim-b does.
    for t in later:
        _direct(sims["sim-b"], t, repeats=15)
        assert _through(gw, t) == "sim-b"
