"""Sending a chat completion through the gateway's own request path, in process.

The Responses API's request becomes a `POST /v1/chat/completions` handed to the
client port's application (llmgw.router.app.GatewayApp) as if the client had sent it,
with the client's headers (its key, tags, session, trace context): the same
authentication, limits, budgets, guardrails, admission, routing and usage records as
any chat request, and nothing of the request path repeated here. The answer is caught
instead of written to a socket: a whole answer as (status, headers, body), a stream as
its pieces, read while the request runs.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from llmgw.http.rsgi import App, Headers, HTTPProtocol, ProtocolClosed, Scope, StreamTransport

CHAT_PATH = "/v1/chat/completions"
# Pieces of a stream held between the chat request and the translation: the request
# waits on a slower reader rather than piling the answer up.
_QUEUE_PIECES = 64


class _Headers:
    """The client's headers, with the body's own length and type."""

    def __init__(self, client: Headers, length: int) -> None:
        self._client = client
        self._own = {"content-length": str(length), "content-type": "application/json"}

    def get(self, name: str, /) -> str | None:
        own = self._own.get(name.lower())
        return own if own is not None else self._client.get(name)


@dataclass(frozen=True)
class _ChatScope:
    headers: _Headers
    proto: str = "http"
    method: str = "POST"
    path: str = CHAT_PATH
    query_string: str = ""


@dataclass
class Answer:
    """The start of the chat answer: its status and headers, and its body whole
    (`stream` None) or to be read from `stream`."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes = b""
    streamed: bool = False
    stream: AsyncIterator[bytes] | None = None


@dataclass
class _Caught:
    """An HTTPProtocol that keeps the answer rather than sending it."""

    body: bytes
    client: HTTPProtocol
    started: asyncio.Future[Answer]
    pieces: asyncio.Queue[bytes | None] = field(default_factory=lambda: asyncio.Queue(_QUEUE_PIECES))
    gone: bool = False

    async def __call__(self) -> bytes:
        return self.body

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._once()

    async def _once(self) -> AsyncIterator[bytes]:
        yield self.body

    def response_bytes(self, status: int, headers: list[tuple[str, str]], body: bytes, /) -> None:
        if not self.started.done():
            self.started.set_result(Answer(status, headers, body))

    def response_stream(
        self, status: int, headers: list[tuple[str, str]], first: bytes = b"", /
    ) -> StreamTransport:
        if first:
            self.pieces.put_nowait(first)
        if not self.started.done():
            self.started.set_result(Answer(status, headers, streamed=True))
        return self

    async def send_bytes(self, data: bytes, /) -> None:
        if self.gone:
            raise ProtocolClosed("the Responses API request was given up")
        await self.pieces.put(data)

    async def client_disconnect(self) -> None:
        # The chat request sees the real client leave, so the engine stops generating.
        await self.client.client_disconnect()


class ChatCall:
    """One chat completion run through `app`; use with `async with`, which ends the
    request (cancelling it if its answer was not read to the end)."""

    def __init__(self, app: App, scope: Scope, client: HTTPProtocol, body: bytes) -> None:
        loop = asyncio.get_running_loop()
        self._caught = _Caught(body, client, loop.create_future())
        self._app = app
        self._scope = _ChatScope(_Headers(scope.headers, len(body)))
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        try:
            await self._app(self._scope, self._caught)
        finally:
            if not self._caught.started.done():
                self._caught.started.set_result(Answer(500, [], b""))
            with contextlib.suppress(asyncio.QueueFull):
                self._caught.pieces.put_nowait(None)

    async def __aenter__(self) -> Answer:
        self._task = asyncio.create_task(self._run(), name="responses-chat")
        try:
            answer = await self._caught.started
            if answer.streamed:
                answer.stream = self._pieces()
            elif not self._task.done():
                await self._task  # a whole answer: the request only has its accounting left
        except BaseException:
            await self.__aexit__()
            raise
        return answer

    async def _pieces(self) -> AsyncIterator[bytes]:
        task = self._task
        assert task is not None
        while True:
            if task.done() and self._caught.pieces.empty():
                return
            piece = await self._caught.pieces.get()
            if piece is None:
                return
            yield piece

    async def __aexit__(self, *_exc: object) -> None:
        task = self._task
        if task is None or task.done():
            return
        self._caught.gone = True
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
