"""One replica's KV-event feed: a ZMQ SUB socket on its publisher, into the index.

vLLM binds a PUB socket (`--kv-events-config` endpoint, opened by the agent on the
replica's kv_events port) and sends `[topic, seq, payload]` batches; this subscribes to
every topic and hands each batch to `KVIndex.apply`, which checks the sequence. A
message that does not decode leaves the index not knowing what the replica holds, so
the replica's entries are dropped as on a gap. ZMQ reconnects by itself after the
engine restarts; the restarted engine's seq from 0 triggers the resync.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import zmq
import zmq.asyncio

from llmgw.protocol.kv_events import EventDecodeError, decode_message
from llmgw.router.kv_index import KVIndex

_log = logging.getLogger(__name__)


class KVSubscriber:
    """Feeds `index` from the publisher at `address` (tcp://host:port) as `replica`."""

    def __init__(self, ctx: zmq.asyncio.Context, replica: str, address: str, index: KVIndex) -> None:
        self.replica = replica
        self.address = address
        self._index = index
        self._sock = ctx.socket(zmq.SUB)
        self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.setsockopt(zmq.SUBSCRIBE, b"")
        self._sock.connect(address)
        self._task: asyncio.Task[None] | None = None
        self.batches = 0

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            frames = await self._sock.recv_multipart()
            try:
                batch = decode_message(frames)
            except EventDecodeError as exc:
                _log.warning("KV events from %s: %s; its index entries are dropped", self.address, exc)
                self._index.drop(self.replica)
                continue
            self._index.apply(self.replica, batch)
            self.batches += 1

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._sock.close(0)
        self._index.drop(self.replica)
