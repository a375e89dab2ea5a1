"""The behaviour model over real sockets: seats and KV blocks queue requests FCFS; the
prefix cache hits a repeated prefix, and evicts it once the working set outgrows it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
from sim_http_helpers import get_json, post_json

from llmgw.testing.sim import SimEngineProcess, start_sim_engine

# Three seats, 64 blocks of 16 tokens; 0.5 ms per prefill token and a flat 20 ms step.
ARGS = (
    "--max-seqs", "3", "--kv-blocks", "64", "--block-size", "16", "--max-model-len", "512",
    "--prefill-ms-per-token", "0.5", "--decode-ms", "20", "--decode-ms-per-seq", "0",
)  # fmt: skip


@pytest.fixture(scope="module")
def sim() -> Iterator[SimEngineProcess]:
    with start_sim_engine(*ARGS) as handle:
        yield handle


def chat(text: str, max_tokens: int) -> dict[str, Any]:
    return {"model": "sim-model", "messages": [{"role": "user", "content": text}], "max_tokens": max_tokens,
            "stream": True}  # fmt: skip


async def stream_ttft(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> float:
    """Seconds from sending to the first content chunk; reads the stream to its end."""
    started = time.perf_counter()
    ttft = -1.0
    async with session.post(url + "/v1/chat/completions", json=body) as response:
        assert response.status == 200
        async for line in response.content:
            if ttft < 0 and b'"content":"' in line and b'"content":""' not in line:
                ttft = time.perf_counter() - started
    return ttft


async def run_and_watch(sim: SimEngineProcess, bodies: list[dict[str, Any]]) -> tuple[list[float], int, int]:
    """Send `bodies` at once; the TTFTs and the most running and waiting seen meanwhile."""
    most_running = most_waiting = 0
    async with aiohttp.ClientSession() as session:
        tasks = [asyncio.create_task(stream_ttft(session, sim.url, body)) for body in bodies]
        for _ in range(200):  # bounded: the whole batch lasts well under a second
            async with session.get(sim.url + "/sim/state") as response:
                state = await response.json()
            most_running = max(most_running, state["running"])
            most_waiting = max(most_waiting, state["waiting"])
            if all(task.done() for task in tasks):
                break
            await asyncio.sleep(0.01)
        return list(await asyncio.gather(*tasks)), most_running, most_waiting


def test_beyond_max_seqs_requests_wait_and_their_ttft_includes_the_queue(sim: SimEngineProcess) -> None:
    bodies = [chat(f"short question number {i}", max_tokens=10) for i in range(5)]
    ttfts, most_running, most_waiting = asyncio.run(run_and_watch(sim, bodies))
    assert most_running == 3
    assert most_waiting == 2
    recent = get_json(sim.url + "/sim/requests?limit=5")["requests"]
    queued = sorted(r["queue_s"] for r in recent)
    assert queued[:3] == pytest.approx([0, 0, 0], abs=0.005)
    # The two that waited were admitted when the first ones finished: 9 steps of 20 ms later.
    assert queued[3:] == pytest.approx([0.18, 0.18], abs=0.02)
    assert sorted(ttfts)[3] > 0.15


def test_requests_whose_blocks_do_not_fit_wait_though_a_seat_is_free(sim: SimEngineProcess) -> None:
    post_json(sim.url + "/reset_prefix_cache", {})
    texts = [f"{i} " + "long words " * 30 for i in range(3)]
    prompt = post_json(sim.url + "/tokenize", {"messages": chat(texts[0], 1)["messages"]})["count"]
    # Prompt and answer fill 30 blocks each, so only two fit in 64 although three seats exist.
    bodies = [chat(text, max_tokens=30 * 16 - prompt) for text in texts]
    most_running, most_waiting = asyncio.run(watch_then_cancel(sim, bodies))
    assert most_running == 2
    assert most_waiting == 1


async def watch_then_cancel(sim: SimEngineProcess, bodies: list[dict[str, Any]]) -> tuple[int, int]:
    """Send `bodies` at once, note the most running and waiting, then hang up on them all."""
    most_running = most_waiting = 0
    async with aiohttp.ClientSession() as session:
        tasks = [asyncio.create_task(stream_ttft(session, sim.url, body)) for body in bodies]
        for _ in range(200):
            async with session.get(sim.url + "/sim/state") as response:
                state = await response.json()
            most_running = max(most_running, state["running"])
            most_waiting = max(most_waiting, state["waiting"])
            if most_waiting and most_running:
                break
            await asyncio.sleep(0.01)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    # Cancelled clients free their seats and blocks: the engine drains to idle.
    for _ in range(200):
        state = get_json(sim.url + "/sim/state")
        if state["running"] == state["waiting"] == 0:
            break
        await asyncio.sleep(0.01)
    assert state["prefix_cache"]["used_blocks"] == 0
    return most_running, most_waiting


def ask(sim: SimEngineProcess, prefix: str, question: str) -> dict[str, Any]:
    """A non-streamed chat and its simulated timeline from /sim/requests."""
    body = {"messages": [{"role": "system", "content": prefix}, {"role": "user", "content": question}],
            "max_tokens": 2}  # fmt: skip
    post_json(sim.url + "/v1/chat/completions", body)
    return dict(get_json(sim.url + "/sim/requests?limit=1")["requests"][0])


def test_a_repeated_prefix_hits_the_cache_and_is_evicted_when_the_working_set_outgrows_it(
    sim: SimEngineProcess,
) -> None:
    post_json(sim.url + "/reset_prefix_cache", {})
    prefix = "You answer questions about the sea. " * 20  # about 160 tokens: 10 blocks
    cold = ask(sim, prefix, "How deep is it?")
    warm = ask(sim, prefix, "How salty is it?")
    assert cold["cached_tokens"] == 0
    assert warm["cached_tokens"] >= 160
    assert warm["ttft_s"] < cold["ttft_s"] / 2
    evictions_before = get_json(sim.url + "/sim/state")["prefix_cache"]["evictions"]
    for i in range(8):  # eight other 10-block prefixes: more than 64 blocks in all
        ask(sim, f"Topic {i}: " + f"facts about subject {i}. " * 25, "Tell me more.")
    state = get_json(sim.url + "/sim/state")
    assert state["prefix_cache"]["evictions"] > evictions_before
    assert state["prefix_cache"]["cached_blocks"] <= 64
    evicted = ask(sim, prefix, "How cold is it?")
    assert evicted["cached_tokens"] == 0
    assert evicted["ttft_s"] == pytest.approx(cold["ttft_s"], rel=0.2)
