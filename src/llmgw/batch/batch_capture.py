"""A request made inside the gateway, and its answer caught in memory: what a batch's
line looks like to the gateway's own request path (`GatewayApp.serve_as`), so each
line goes through the same resolution, limits, budgets, guardrails, admission and usage
as a client's request, without a socket in between."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field


@dataclass(frozen=True)
class LineHeaders:
    """Request headers by lower-case name."""

    values: dict[str, str]

    def get(self, name: str, /) -> str | None:
        return self.values.get(name.lower())


@dataclass(frozen=True)
class LineScope:
    """The head of a line's request: always a POST to a generation route."""

    path: str
    headers: LineHeaders
    method: str = "POST"
    proto: str = "http"
    query_string: str = ""


class _Collector:
    """The transport of a streamed answer, keeping what is sent."""

    def __init__(self, parts: list[bytes]) -> None:
        self._parts = parts

    async def send_bytes(self, data: bytes, /) -> None:
        self._parts.append(data)


@dataclass
class Captured:
    """The request body going in, and the answer coming out."""

    body: bytes
    status: int | None = None
    headers: list[tuple[str, str]] = field(default_factory=list)
    parts: list[bytes] = field(default_factory=list)

    async def __call__(self) -> bytes:
        return self.body

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._once()

    async def _once(self) -> AsyncIterator[bytes]:
        yield self.body

    def response_bytes(self, status: int, headers: list[tuple[str, str]], body: bytes, /) -> None:
        self.status, self.headers = status, headers
        self.parts.append(body)

    def response_stream(
        self, status: int, headers: list[tuple[str, str]], first: bytes = b"", /
    ) -> _Collector:
        self.status, self.headers = status, headers
        if first:
            self.parts.append(first)
        return _Collector(self.parts)

    async def client_disconnect(self) -> None:
        # The runner never leaves a line's request: it is cancelled with its task.
        await asyncio.Event().wait()

    def header(self, name: str) -> str | None:
        for key, value in self.headers:
            if key.lower() == name:
                return value
        return None

    @property
    def answer(self) -> bytes:
        return b"".join(self.parts)
