"""The sim's KV-cache events, published as vLLM publishes them (`--kv-events-port`).

A ZMQ PUB socket bound on the sim's host sends, every few milliseconds while the cache
changed, one `[topic, seq, payload]` batch of BlockStored/BlockRemoved events taken
from the block pool's journal (llmgw.protocol.kv_events has the format). `seq` counts
from 0 per process, so a restarted sim starts over as a restarted vLLM does.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import zmq

from llmgw.protocol.kv_events import encode_message, encode_removed, encode_stored
from llmgw.sim.prefix_cache import BlockPool

_PERIOD_S = 0.005


class KVEventPublisher:
    """Drains a pool's journal onto a bound PUB socket."""

    def __init__(self, pool: BlockPool, host: str, port: int, block_size: int) -> None:
        self._pool = pool
        self._block_size = block_size
        pool.journal = []
        self._ctx = zmq.Context()
        self._sock = self._ctx.socket(zmq.PUB)
        self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.bind(f"tcp://{host}:{port}")
        self._seq = 0
        self._task: asyncio.Task[None] | None = None

    def flush(self) -> None:
        """Send what the journal holds as one batch, if anything."""
        journal = self._pool.journal
        if not journal:
            return
        events = [
            # Keys go out in vLLM's int form (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES); the
            # sim keeps no token ids per block, and the router does not read them.
            encode_stored(list(keys), None, [], self._block_size)
            if kind == "stored"
            else encode_removed(list(keys))
            for kind, keys in journal
        ]
        journal.clear()
        self._sock.send_multipart(encode_message(self._seq, time.time(), events))
        self._seq += 1

    async def _run(self) -> None:
        while True:
            self.flush()
            await asyncio.sleep(_PERIOD_S)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._sock.close(0)
        self._ctx.term()
