"""Admission with engines that preempt by priority, through `llmgw server`: two sim
replicas started with `--scheduling-policy priority` (one sequence each, 20 ms a
token), endpoints with `priority_scheduling: true`, and `router.scoring.target_inflight:
1`, so a low-band stream on each replica saturates the model. Platinum is still admitted
at once, its replica preempts the low-band request there and answers platinum first,
and the preempted request resumes and finishes with every one of its tokens.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from llmgw.testing.server import GatewayProcess, start_gateway
from llmgw.testing.sim import SimEngineProcess, start_sim_engine
from support.sims import endpoint

pytestmark = pytest.mark.slow

PRIORITY_SIM = (
    "--model", "m", "--scheduling-policy", "priority", "--max-seqs", "1",
    "--decode-ms", "20", "--decode-ms-per-seq", "0", "--prefill-ms-per-token", "0.01",
)  # fmt: skip
LOW_TOKENS = 60  # 1.2 s of decoding: the replicas stay held while platinum is asked


@pytest.fixture(scope="module")
def sims() -> Iterator[tuple[SimEngineProcess, SimEngineProcess]]:
    a = start_sim_engine(*PRIORITY_SIM)
    try:
        b = start_sim_engine(*PRIORITY_SIM)
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
        "endpoints": [
            endpoint("prio-a", a, "m", priority_scheduling=True),
            endpoint("prio-b", b, "m", priority_scheduling=True),
        ],
        "router": {"scoring": {"target_inflight": 1}, "scrape_interval": "200ms"},
    }
    handle = start_gateway(config, timeout=60.0)
    try:
        yield handle
    finally:
        handle.stop()


def chat(max_tokens: int, *, priority: int | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "m",
        "messages": [{"role": "user", "content": "hello"}],
        "max_tokens": max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if priority is not None:
        body["priority"] = priority  # the client's own: the gateway must not pass it on
    return body


async def stream(
    client: httpx.AsyncClient,
    gw: GatewayProcess,
    band: str,
    max_tokens: int,
    started: asyncio.Event | None = None,
) -> tuple[float, int]:
    """Seconds to the first event and the completion tokens the usage event reports."""
    begun = time.monotonic()
    ttft = -1.0
    tokens = -1
    async with client.stream(
        "POST",
        gw.base_url + "/chat/completions",
        json=chat(max_tokens, priority=-5),
        headers={"x-llmgw-band": band},
    ) as response:
        assert response.status_code == 200, await response.aread()
        async for line in response.aiter_lines():
            if not line.startswith("data: {"):
                continue
            if ttft < 0:
                ttft = time.monotonic() - begun
                if started is not None:
                    started.set()
            if '"usage":{' in line and '"choices":[]' in line:
                tokens = int(line.split('"completion_tokens":')[1].split(",")[0].split("}")[0])
    return ttft, tokens


async def sim_json(client: httpx.AsyncClient, sim: SimEngineProcess, path: str) -> Any:
    return (await client.get(sim.admin_url + path)).json()


def test_platinum_preempts_low_band_work_that_fills_every_replica(
    gateway: GatewayProcess, sims: tuple[SimEngineProcess, SimEngineProcess]
) -> None:
    async def main() -> None:
        async with httpx.AsyncClient(timeout=30.0) as client:
            # Bronze (ceiling 0.3) and then gold take one replica each: 2 of 2 in flight.
            bronze_on = asyncio.Event()
            bronze = asyncio.ensure_future(stream(client, gateway, "bronze", LOW_TOKENS, bronze_on))
            await asyncio.wait_for(bronze_on.wait(), 10)
            gold_on = asyncio.Event()
            gold = asyncio.ensure_future(stream(client, gateway, "gold", LOW_TOKENS, gold_on))
            await asyncio.wait_for(gold_on.wait(), 10)
            states = [await sim_json(client, s, "/sim/state") for s in sims]
            assert [s["running"] for s in states] == [1, 1]
            platinum_ttft, platinum_tokens = await stream(client, gateway, "platinum", 3)
            low = await asyncio.gather(bronze, gold)
            # Admitted at once and answered first: a prefill, not a wait for 1.2 s.
            assert platinum_ttft < 0.4
            assert platinum_tokens == 3
            # The preempted one lost nothing.
            assert [tokens for _, tokens in low] == [LOW_TOKENS, LOW_TOKENS]
            states = [await sim_json(client, s, "/sim/state") for s in sims]
            assert sum(s["preemptions"] for s in states) == 1
            jobs = [j for s in sims for j in (await sim_json(client, s, "/sim/requests"))["requests"]]
            # The band's priority reached the engine in place of the client's -5.
            assert sorted(j["priority"] for j in jobs) == [0, 100, 300]
            preempted = [j for j in jobs if j["preemptions"]]
            assert len(preempted) == 1
            assert preempted[0]["completion_tokens"] == LOW_TOKENS
            assert preempted[0]["priority"] in (100, 300)

    asyncio.run(main())
