"""A sim publishing KV events in vLLM's wire format, read by the router's subscriber
into the index: a prompt the sim served is found there by hashing its tokens, and a
restarted sim's entries are dropped and relearned."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import httpx
import zmq.asyncio

from llmgw.engines.vllm import KV_EVENTS_HASH_SEED
from llmgw.protocol.kv_hash import block_key, hash_blocks, none_hash
from llmgw.router.kv_index import KVIndex
from llmgw.router.kv_subscriber import KVSubscriber
from llmgw.testing.server import free_port
from llmgw.testing.sim import start_sim_engine

_BLOCK = 16


def _messages(n: int) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"tell me about sea number {n} " * 40}]


def _keys(url: str, messages: list[dict[str, Any]]) -> list[int]:
    tokens = httpx.post(f"{url}/tokenize", json={"messages": messages}, timeout=5).json()["tokens"]
    return [block_key(h) for h in hash_blocks(tokens, _BLOCK, none_hash(KV_EVENTS_HASH_SEED), 4096)]


def _chat(url: str, messages: list[dict[str, Any]]) -> None:
    body = {"model": "sim-model", "messages": messages, "max_tokens": 2}
    assert httpx.post(f"{url}/v1/chat/completions", json=body, timeout=10).status_code == 200


async def _until(check: Callable[[], bool], seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        await asyncio.sleep(0.02)
    return False


async def _served_and_indexed(url: str, index: KVIndex, first: int) -> list[int]:
    """Serve fresh prompts until the index learns one (the SUB socket may join after
    the first batches are sent, and a cached prompt sends no new events); its keys."""
    for n in range(first, first + 50):
        keys = _keys(url, _messages(n))
        await asyncio.to_thread(_chat, url, _messages(n))
        if await _until(lambda k=keys: index.leading(k).get("r1", 0) > 0, 0.3):  # type: ignore[misc]
            return keys
    raise AssertionError("the index learned none of 50 prompts")


async def _feed_then_restart() -> None:
    port = free_port()
    index = KVIndex()
    ctx = zmq.asyncio.Context()
    sub = KVSubscriber(ctx, "r1", f"tcp://127.0.0.1:{port}", index)
    sub.start()
    sim = start_sim_engine("--kv-events-port", str(port))
    try:
        keys = await _served_and_indexed(sim.url, index, 0)
        assert len(keys) > 10
        # The sim caches all prompt blocks but the one holding the last token.
        assert index.leading(keys)["r1"] >= len(keys) - 1
        sim.stop()
        # The lost connection (or, had it gone unseen, seq starting over) drops what the
        # old process held: its cache died with it.
        assert await _until(lambda: index.leading(keys) == {})
        sim = start_sim_engine("--kv-events-port", str(port))
        fresh = await _served_and_indexed(sim.url, index, 100)
        assert index.leading(fresh)["r1"] >= len(fresh) - 1
        assert index.leading(keys) == {}
    finally:
        sim.stop()
        await sub.close()
        ctx.term()


def test_the_index_learns_what_the_sim_cached_and_resyncs_on_restart() -> None:
    asyncio.run(_feed_then_restart())
