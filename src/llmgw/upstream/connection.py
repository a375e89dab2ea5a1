"""One HTTP/1.1 connection to an engine replica, driven by httptools.

Why not aiohttp's or httpx's client: on the request path the client is most of the
gateway's cost. Measured side by side on this project's (shared, loaded) machine,
streaming chat completions from a sim engine 16 at a time (bench/router/client_choice.py,
bench/results/router-client-choice.md), aiohttp's client spent about 410 µs of CPU per
request and httpx's about 3.6 ms where this protocol, which parses with the same llhttp
parser as aiohttp through httptools, spends about 180. What it leaves out is what a
gateway talking to its own replicas does not need: redirects, cookies, proxies, compression, HTTP/2.

A connection carries one exchange at a time. The body arrives as it is read from the
socket; when the reader falls behind, reading from the socket is paused, so a slow
client slows its replica instead of filling the gateway's memory.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import cast

import httptools

from llmgw.errors import UpstreamClosed, UpstreamProtocol

# Past this many unread bytes the socket is paused until the reader catches up.
_HIGH_WATER_BYTES = 256 * 1024


class Connection(asyncio.Protocol):
    """An HTTP/1.1 client connection; use `exchange`, then `read_chunk` or `read_body`."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._parser = httptools.HttpResponseParser(self)
        self._transport: asyncio.Transport | None = None
        self._head: asyncio.Future[int] | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._chunks: deque[bytes] = deque()
        self._buffered = 0
        self._paused = False
        self._complete = False
        self._error: Exception | None = None
        self.headers: list[tuple[bytes, bytes]] = []
        self.status = 0
        self.closed = False
        self.reusable = False

    # --- asyncio.Protocol -------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not subclasses of asyncio.Transport, only alike.
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(UpstreamProtocol("the replica tried to switch protocols"))
        except httptools.HttpParserError as exc:
            self._fail(UpstreamProtocol(f"the replica's answer is not valid HTTP: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if not self._complete:
            self._fail(UpstreamClosed("the replica closed the connection before the answer was complete"))

    # --- httptools callbacks ------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        self.status = self._parser.get_status_code()
        head = self._head
        if head is not None and not head.done():
            head.set_result(self.status)

    def on_body(self, body: bytes) -> None:
        self._chunks.append(body)
        self._buffered += len(body)
        if self._buffered > _HIGH_WATER_BYTES and not self._paused and self._transport is not None:
            self._paused = True
            self._transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        self._complete = True
        self.reusable = self._parser.should_keep_alive()
        self._wake()

    # --- the exchange -----------------------------------------------------------------

    async def exchange(self, head: bytes, body: bytes) -> int:
        """Sends one request and waits for the answer's status line and headers."""
        if self.closed or self._transport is None:
            raise UpstreamClosed("the connection to the replica is closed")
        self.headers = []
        self.status = 0
        self._complete = False
        self.reusable = False
        self._head = self._loop.create_future()
        self._transport.write(head + body if len(body) < 65536 else head)
        if len(body) >= 65536:
            self._transport.write(body)
        try:
            return await self._head
        finally:
            self._head = None

    async def read_chunk(self) -> bytes | None:
        """The next piece of the body as it arrived, or None once it is complete."""
        while True:
            if self._chunks:
                chunk = self._chunks.popleft()
                self._buffered -= len(chunk)
                if self._paused and self._buffered <= _HIGH_WATER_BYTES // 4 and self._transport is not None:
                    self._paused = False
                    self._transport.resume_reading()
                return chunk
            if self._complete:
                return None
            if self._error is not None:
                raise self._error
            self._waiter = self._loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None

    async def read_available(self) -> bytes | None:
        """Everything that has arrived, as one piece (waiting for the next piece when
        nothing has), or None once the body is complete. A relay that writes what this
        returns makes one write to its client for a burst of events rather than one per
        event, while a replica that sends token by token is still relayed token by token."""
        first = await self.read_chunk()
        if first is None or not self._chunks:
            return first
        parts = [first]
        while self._chunks:
            chunk = self._chunks.popleft()
            self._buffered -= len(chunk)
            parts.append(chunk)
        if self._paused and self._transport is not None:
            self._paused = False
            self._transport.resume_reading()
        return b"".join(parts)

    async def read_body(self) -> bytes:
        """The whole body, once it is complete."""
        parts: list[bytes] = []
        while (chunk := await self.read_chunk()) is not None:
            parts.append(chunk)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    @property
    def complete(self) -> bool:
        return self._complete

    def expire(self, error: Exception) -> None:
        """Ends the exchange with `error` (a phase timeout) and closes the socket, so
        the replica sees its client leave and stops generating."""
        if not self.closed:
            self._fail(error)

    def close(self) -> None:
        """Closes the socket: a replica sees its client leave and stops generating."""
        self.closed = True
        self.reusable = False
        # The stored error's traceback holds the frames it passed through; dropping it
        # lets a finished request's objects be freed at once instead of by the collector.
        self._error = None
        if self._transport is not None:
            self._transport.close()

    # --- internals --------------------------------------------------------------------

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _fail(self, error: Exception) -> None:
        # The first failure is the one that explains the exchange: a timeout closes the
        # socket, and the close that follows must not be reported in its place.
        if self._error is None:
            self._error = error
        self.reusable = False
        head = self._head
        if head is not None and not head.done():
            head.set_exception(self._error)
        self._wake()
        if self._transport is not None and not self.closed:
            self.closed = True
            self._transport.close()
