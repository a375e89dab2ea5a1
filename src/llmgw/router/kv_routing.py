"""Exact KV-cache routing (tier 0), ahead of the approximate prefix tree (tier 1).

For replicas that publish vLLM's KV events (an endpoint with `kv_events`), the router
keeps an index of the blocks each holds (`KVIndex`, fed by one `KVSubscriber` per
replica). For a chat request it asks one such replica to tokenize the prompt
(`/tokenize`, within `router.kv_index.tokenize_timeout`), hashes the first `max_blocks`
full blocks as vLLM does (llmgw.protocol.kv_hash, seeded as the agent seeds
PYTHONHASHSEED) and looks them up; the picker then prefers the replica holding the
most leading blocks, when that is at least `min_blocks` and the load is not out of
balance. A tokenize that fails or runs out of time leaves the request to tier 1.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
import zmq.asyncio

from llmgw.engines.vllm import KV_EVENTS_HASH_SEED
from llmgw.protocol.kv_hash import block_key, hash_blocks, none_hash
from llmgw.router.endpoints import Endpoint, EndpointRegistry
from llmgw.router.kv_index import KVIndex
from llmgw.router.kv_subscriber import KVSubscriber
from llmgw.router.request import ClientRequest, Kind

_log = logging.getLogger(__name__)
# How often the subscribers are matched to the endpoints in force (the control plane
# publishes replicas as they come and go).
_SYNC_S = 1.0
# vLLM's default block size; the sim's too.
_BLOCK_SIZE = 16


@dataclass(frozen=True, slots=True)
class KVRules:
    """`router.kv_index` in plain numbers."""

    tokenize_timeout_s: float
    min_blocks: int
    max_blocks: int


class KVRouting:
    """The index, its feeds, and the per-request lookup."""

    def __init__(self, endpoints: EndpointRegistry, rules: KVRules) -> None:
        self.rules = rules
        self.index = KVIndex()
        self._endpoints = endpoints
        self._root = none_hash(KV_EVENTS_HASH_SEED)
        self._ctx: zmq.asyncio.Context | None = None
        self._subs: dict[str, KVSubscriber] = {}
        self._session: aiohttp.ClientSession | None = None
        self.fallbacks = 0

    async def sync(self) -> None:
        """Subscribe to every endpoint with `kv_events`; drop the feeds of the others."""
        wanted = {e.id: e.spec.kv_events for e in self._endpoints.all() if e.spec.kv_events}
        for eid, sub in list(self._subs.items()):
            if wanted.get(eid) != sub.address:
                del self._subs[eid]
                await sub.close()
        for eid, address in wanted.items():
            if eid not in self._subs:
                if self._ctx is None:
                    self._ctx = zmq.asyncio.Context()
                sub = KVSubscriber(self._ctx, eid, address, self.index)
                sub.start()
                self._subs[eid] = sub

    async def run(self) -> None:
        try:
            while True:
                await self.sync()
                await asyncio.sleep(_SYNC_S)
        finally:
            await self.close()

    async def close(self) -> None:
        for sub in self._subs.values():
            await sub.close()
        self._subs.clear()
        if self._session is not None:
            await self._session.close()
        if self._ctx is not None:
            self._ctx.term()

    async def lengths(self, candidates: Sequence[Endpoint], request: ClientRequest) -> dict[str, int] | None:
        """Leading blocks of this prompt each replica holds; None when the index has no
        say (no candidate publishes events, or the tokenize failed or ran out of time)."""
        feeding = [e for e in candidates if e.id in self._subs]
        body = _tokenize_body(request)
        if not feeding or body is None:
            return None
        tokens = await self._tokenize(feeding[0], body)
        if tokens is None:
            self.fallbacks += 1
            return None
        hashes = hash_blocks(tokens, _BLOCK_SIZE, self._root, self.rules.max_blocks)
        return self.index.leading([block_key(h) for h in hashes])

    async def _tokenize(self, endpoint: Endpoint, body: dict[str, Any]) -> list[int] | None:
        if self._session is None:
            self._session = aiohttp.ClientSession()
        url = endpoint.spec.url.rstrip("/").removesuffix("/v1") + "/tokenize"
        headers = {"Authorization": f"Bearer {endpoint.spec.api_key}"} if endpoint.spec.api_key else {}
        timeout = aiohttp.ClientTimeout(total=self.rules.tokenize_timeout_s)
        try:
            async with self._session.post(url, json=body, headers=headers, timeout=timeout) as resp:
                if resp.status != 200:
                    return None
                data = await resp.json()
        except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
            _log.debug("tokenize at %s for KV routing: %r; routing by the prefix tree", endpoint.id, exc)
            return None
        tokens = data.get("tokens") if isinstance(data, dict) else None
        if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
            return None
        return tokens


def _tokenize_body(request: ClientRequest) -> dict[str, Any] | None:
    """What vLLM's /tokenize takes for this request: its chat messages (rendered with the
    generation prompt, as the engine renders them) or its text prompt."""
    body = request.body
    if request.kind is Kind.CHAT and isinstance(body.get("messages"), list):
        return {"messages": body["messages"], "add_generation_prompt": True}
    if request.kind is Kind.COMPLETIONS and isinstance(body.get("prompt"), str):
        return {"prompt": body["prompt"]}
    return None
