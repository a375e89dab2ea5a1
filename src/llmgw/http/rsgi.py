"""What the gateway's applications see of an HTTP request, in one place.

The shape is RSGI's (granian served these applications first): the application is
called with a scope (method, path, headers) and a protocol object it reads the body
from and answers through. The server behind it is llmgw's own
(llmgw.http.http1); these Protocols are all the applications may rely on, so an
in-memory fake serves them as well in tests and benchmarks.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Protocol

from llmgw.errors import LlmgwError


class ProtocolClosed(LlmgwError):
    """The client's connection is gone: nothing more can be sent to it or read from it."""


class Headers(Protocol):
    def get(self, name: str, /) -> str | None:
        """The first value of a request header by its name, in any case; None without it."""
        ...


class Scope(Protocol):
    @property
    def proto(self) -> str:
        """Always "http" (RSGI also names websocket scopes, which llmgw does not serve)."""
        ...

    @property
    def method(self) -> str: ...

    @property
    def path(self) -> str:
        """The request path, percent-decoded, without the query string."""
        ...

    @property
    def query_string(self) -> str:
        """What follows the `?`, as sent (not decoded); empty without one."""
        ...

    @property
    def headers(self) -> Headers: ...


class StreamTransport(Protocol):
    async def send_bytes(self, data: bytes, /) -> None:
        """Sends one piece of a streamed response; waits while the client reads slower
        than it is written to; raises ProtocolClosed once the client has gone."""
        ...


class HTTPProtocol(Protocol):
    async def __call__(self) -> bytes:
        """The whole request body."""
        ...

    def __aiter__(self) -> AsyncIterator[bytes]:
        """The request body piece by piece, as it arrives."""
        ...

    def response_bytes(self, status: int, headers: list[tuple[str, str]], body: bytes, /) -> None:
        """The whole response at once."""
        ...

    def response_stream(
        self, status: int, headers: list[tuple[str, str]], first: bytes = b"", /
    ) -> StreamTransport:
        """Starts a response whose body follows through the returned transport; it ends
        when the application's handler returns. `first` is the beginning of the body
        when it is already at hand: it goes out with the head, in one write."""
        ...

    async def client_disconnect(self) -> None:
        """Returns once the client's connection is lost."""
        ...


App = Callable[[Scope, HTTPProtocol], Awaitable[None]]
"""An application: called once per request, it answers through the protocol."""


__all__ = ["App", "HTTPProtocol", "Headers", "ProtocolClosed", "Scope", "StreamTransport"]
