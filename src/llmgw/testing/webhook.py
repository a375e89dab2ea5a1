"""A webhook receiver on loopback for tests: a real aiohttp server, in a thread of its own
so a synchronous test (one driving `llmgw server` as a subprocess) and an asynchronous
one can both use it. It keeps every request it was sent and answers `status`; `stop`
and `start` again on the same port play a receiver that goes down and comes back."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from llmgw.testing.server import free_port


@dataclass(frozen=True)
class Received:
    headers: dict[str, str]
    body: bytes

    @property
    def event(self) -> dict[str, Any]:
        decoded = orjson.loads(self.body)
        assert isinstance(decoded, dict)
        return decoded


class WebhookReceiver:
    """`url` takes POSTs; `received` holds them in order of arrival."""

    def __init__(self, port: int = 0) -> None:
        self.port = port or free_port()
        self.status = 200
        self.received: list[Received] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="webhook-receiver", daemon=True)
        self._thread.start()
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    async def _take(self, request: web.Request) -> web.Response:
        headers = {k.lower(): v for k, v in request.headers.items()}
        self.received.append(Received(headers, await request.read()))
        return web.Response(status=self.status, text="taken" if self.status < 300 else "not now")

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_post("/hook", self._take)
        runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.5)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", self.port, reuse_address=True).start()
        self._runner = runner

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def start(self) -> WebhookReceiver:
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    def stop(self) -> None:
        """Stops listening: connections to the port are refused until `start`."""
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(10)

    def close(self) -> None:
        self.stop()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def events(self, event_type: str | None = None) -> list[Received]:
        return [r for r in list(self.received) if event_type is None or r.event["type"] == event_type]

    def wait_for(self, what: Callable[[], object], timeout: float, explain: str) -> None:
        """Polls `what` until true; AssertionError after `timeout` s."""
        deadline = time.monotonic() + timeout
        while not what():
            if time.monotonic() > deadline:
                raise AssertionError(f"{explain}: not within {timeout:g}s; received {self.received!r}")
            time.sleep(0.05)


def receiver(port: int = 0) -> Iterator[WebhookReceiver]:
    """A started receiver, closed after (for a pytest fixture)."""
    handle = WebhookReceiver(port).start()
    try:
        yield handle
    finally:
        handle.close()
