"""A sim publishing KV events in vLLM's wire format, read by the router's subscriber
into the index: a prompt the sim served is found there by hashing its tokens."""

from __future__ import annotations

import asyncio
import time

import httpx
import zmq.asyncio

from llmgw.engines.vllm import KV_EVENTS_HASH_SEED
from llmgw.protocol.kv_hash import block_key, hash_blocks, none_hash
from llmgw.router.kv_index import KVIndex
from llmgw.router.kv_subscriber import KVSubscriber
from llmgw.testing.server import free_port
from llmgw.testing.sim import start_sim_engine

_MESSAGES = [{"role": "user", "content": "tell me about the sea " * 40}]
_BLOCK = 16


def _keys(url: str) -> list[int]:
    tokens = httpx.post(f"{url}/tokenize", json={"messages": _MESSAGES}, timeout=5).json()["tokens"]
    return [block_key(h) for h in hash_blocks(tokens, _BLOCK, none_hash(KV_EVENTS_HASH_SEED), 4096)]


def _chat(url: str) -> None:
    body = {"model": "sim-model", "messages": _MESSAGES, "max_tokens": 2}
    assert httpx.post(f"{url}/v1/chat/completions", json=body, timeout=10).status_code == 200


async def _until(check: object, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if callable(check) and check():
            return True
        await asyncio.sleep(0.02)
    return False


async def _feed_then_restart() -> None:
    port = free_port()
    index = KVIndex()
    ctx = zmq.asyncio.Context()
    sub = KVSubscriber(ctx, "r1", f"tcp://127.0.0.1:{port}", index)
    sub.start()
    sim = start_sim_engine("--kv-events-port", str(port))
    try:
        keys = _keys(sim.url)
        assert len(keys) > 10
        # The SUB socket may join after the first batches: send until the index has it.
        for _ in range(50):
            await asyncio.to_thread(_chat, sim.url)
            if await _until(lambda: index.leading(keys).get("r1", 0) > 0, 0.2):
                break
        # The sim caches all prompt blocks but the one holding the last token.
        assert index.leading(keys)["r1"] >= len(keys) - 1
        before = index.resyncs
        sim.stop()
        sim = start_sim_engine("--kv-events-port", str(port))
        # The restarted engine's empty cache is learned through seq starting over.
        for _ in range(50):
            await asyncio.to_thread(_chat, sim.url)
            if await _until(lambda: sub.batches > 0 and index.resyncs > before, 0.2):
                break
        assert index.resyncs > before
        assert index.leading(keys)["r1"] >= len(keys) - 1
    finally:
        sim.stop()
        await sub.close()
        ctx.term()


def test_the_index_learns_what_the_sim_cached_and_resyncs_on_restart() -> None:
    asyncio.run(_feed_then_restart())
