"""What the request path needs to trace a request, without importing OpenTelemetry: the
GenAI operation name of each route, and a protocol wrapper that remembers the status a
traced request was answered with, whoever answered it (the dispatcher, a refusal).
Used only for a sampled request; an untraced one never meets them."""

from __future__ import annotations

from collections.abc import AsyncIterator

from llmgw.http.rsgi import HTTPProtocol, StreamTransport
from llmgw.router.request import Kind

# gen_ai.operation.name, by route (OpenTelemetry's GenAI semantic conventions).
OPERATIONS: dict[Kind, str] = {
    Kind.CHAT: "chat",
    Kind.COMPLETIONS: "text_completion",
    Kind.EMBEDDINGS: "embeddings",
}


class StatusSeen:
    """An HTTPProtocol that passes everything on and keeps the response's status (the
    first one: a refusal after an answer began is not one)."""

    __slots__ = ("_proto", "status")

    def __init__(self, proto: HTTPProtocol) -> None:
        self._proto = proto
        self.status: int | None = None

    async def __call__(self) -> bytes:
        return await self._proto()

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._proto.__aiter__()

    def response_bytes(self, status: int, headers: list[tuple[str, str]], body: bytes, /) -> None:
        self._seen(status)
        self._proto.response_bytes(status, headers, body)

    def response_stream(
        self, status: int, headers: list[tuple[str, str]], first: bytes = b"", /
    ) -> StreamTransport:
        self._seen(status)
        return self._proto.response_stream(status, headers, first)

    async def client_disconnect(self) -> None:
        await self._proto.client_disconnect()

    def _seen(self, status: int) -> None:
        if self.status is None:
            self.status = status
