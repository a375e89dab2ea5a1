"""One replica's KV-event feed: a ZMQ SUB socket on its publisher, into the index.

vLLM binds a PUB socket (`--kv-events-config` endpoint, opened by the agent on the
replica's kv_events port) and sends `[topic, seq, payload]` batches; this subscribes to
every topic and hands each batch to `KVIndex.apply`, which checks the sequence. A
message that does not decode leaves the index not knowing what the replica holds, so
the replica's entries are dropped as on a gap. ZMQ reconnects by itself after the
engine restarts. A lost connection drops the replica's entries at once (a socket
monitor reports it), since a restarted engine's first batches may be sent before the
subscriber is back and its seq starting over would then go unseen.
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
        self._monitor = self._sock.get_monitor_socket(zmq.EVENT_DISCONNECTED)
        self._tasks: list[asyncio.Task[None]] = []
        self.batches = 0
        self.disconnects = 0

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._run()), loop.create_task(self._watch())]

    async def _watch(self) -> None:
        while True:
            await self._monitor.recv_multipart()  # only EVENT_DISCONNECTED is asked for
            self.disconnects += 1
            self._index.drop(self.replica)

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
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._sock.disable_monitor()
        self._monitor.close(0)
        self._sock.close(0)
        self._index.drop(self.replica)
