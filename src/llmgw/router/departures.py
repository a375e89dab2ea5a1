"""Noticing clients that leave before their answer is complete.

When a client disconnects, the request's work is cancelled, which closes the
replica's connection, so the engine stops generating for nobody. Watching for the
disconnect costs a future per request, and most answers from a fast replica are over
before a client could give up on them; so a request is watched only once it has been
in flight for `patience` seconds, picked up by a sweep every `tick`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from llmgw.http.rsgi import HTTPProtocol


class Stay:
    """One request in flight: its task, its client, and the watcher once armed."""

    __slots__ = ("arrived", "gone", "proto", "task", "watcher")

    def __init__(self, proto: HTTPProtocol, task: asyncio.Task[Any], arrived: float) -> None:
        self.proto = proto
        self.task = task
        self.arrived = arrived
        self.watcher: asyncio.Future[Any] | None = None
        self.gone = False

    def _left(self, _: asyncio.Future[Any]) -> None:
        self.gone = True
        self.task.cancel()


class Departures:
    """The requests in flight, and the sweep that watches the long ones."""

    def __init__(self, patience: float = 1.0, tick: float = 0.25) -> None:
        self._patience = patience
        self._tick = tick
        self._stays: set[Stay] = set()

    def enter(self, proto: HTTPProtocol, task: asyncio.Task[Any], now: float) -> Stay:
        stay = Stay(proto, task, now)
        self._stays.add(stay)
        return stay

    def leave(self, stay: Stay) -> None:
        self._stays.discard(stay)
        watcher = stay.watcher
        if watcher is not None:
            watcher.remove_done_callback(stay._left)
            watcher.cancel()

    def watch_now(self, stay: Stay) -> None:
        """Watches a request at once: one about to wait in a queue must leave it as soon
        as its client does."""
        if stay.watcher is None:
            stay.watcher = asyncio.ensure_future(stay.proto.client_disconnect())
            stay.watcher.add_done_callback(stay._left)

    def sweep(self, now: float) -> int:
        """Arms a watcher on every request in flight for `patience`; returns how many."""
        armed = 0
        for stay in self._stays:
            if stay.watcher is None and now - stay.arrived >= self._patience:
                self.watch_now(stay)
                armed += 1
        return armed

    def __len__(self) -> int:
        return len(self._stays)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self._tick)
            self.sweep(loop.time())
