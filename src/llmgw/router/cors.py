"""Cross-origin requests from browsers (`router.cors`): which origins may call the API
from a page, the answer to their preflight, and the headers every answer to them
carries, the gateway's own errors and streams included.

The headers for an origin in the list are built once, at start; a request pays a
dictionary lookup of its `Origin` and nothing when it sends none. The origin is echoed
rather than `*` so that one configuration serves both a list and "any" (`*`), and
credentials mode is not offered: the API is called with an Authorization header, which
needs none.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence

from llmgw.http.rsgi import HTTPProtocol, StreamTransport

Headers = tuple[tuple[str, str], ...]

# What a page may read of an answer besides the body and the CORS-safelisted headers.
EXPOSED = ", ".join(
    (
        "x-request-id",
        "x-llmgw-model",
        "x-llmgw-replica",
        "retry-after",
        "x-ratelimit-limit-requests",
        "x-ratelimit-limit-tokens",
        "x-ratelimit-remaining-requests",
        "x-ratelimit-remaining-tokens",
        "x-ratelimit-reset-requests",
        "x-ratelimit-reset-tokens",
    )
)
_MAX_REQUESTED = 1024
# A comma-separated list of header names, as Access-Control-Request-Headers holds.
_HEADER_LIST = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z, -]*$")


class CorsPolicy:
    """The origins allowed and the headers answered to them."""

    def __init__(self, origins: Sequence[str], allow_headers: Sequence[str], max_age_s: float) -> None:
        self._any = "*" in origins
        self._allow_headers = ", ".join(allow_headers)
        self._max_age = str(int(max_age_s))
        self._listed: dict[str, Headers] = {o: _answer(o) for o in origins if o != "*"}

    def allows(self, origin: str) -> bool:
        return origin in self._listed or (self._any and origin != "null")

    def response_headers(self, origin: str | None) -> Headers:
        """What an answer to a request from `origin` carries: empty for none or one
        not allowed."""
        if origin is None:
            return ()
        listed = self._listed.get(origin)
        if listed is not None:
            return listed
        # Any origin: not kept, since the client chooses the key.
        return _answer(origin) if self.allows(origin) else ()

    def preflight_headers(self, origin: str, methods: str, requested: str | None) -> Headers:
        """The 204 answer to a preflight from an allowed `origin` for a route taking
        `methods`. Without a list of headers, those the browser asked for are allowed."""
        allow = self._allow_headers
        if not allow and requested and len(requested) <= _MAX_REQUESTED and _HEADER_LIST.match(requested):
            allow = requested
        headers = [
            ("access-control-allow-origin", origin),
            ("access-control-allow-methods", methods),
            ("access-control-max-age", self._max_age),
            ("vary", "Origin, Access-Control-Request-Method, Access-Control-Request-Headers"),
        ]
        if allow:
            headers.append(("access-control-allow-headers", allow))
        return tuple(headers)


def _answer(origin: str) -> Headers:
    return (
        ("access-control-allow-origin", origin),
        ("vary", "Origin"),
        ("access-control-expose-headers", EXPOSED),
    )


class WithHeaders:
    """An HTTPProtocol that adds `extra` to every response made through it, so the
    dispatcher's answers and streams carry the CORS headers without knowing of them.
    Made only for a request that needs it."""

    __slots__ = ("_extra", "_proto")

    def __init__(self, proto: HTTPProtocol, extra: Headers) -> None:
        self._proto = proto
        self._extra = extra

    async def __call__(self) -> bytes:
        return await self._proto()

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._proto.__aiter__()

    def response_bytes(self, status: int, headers: list[tuple[str, str]], body: bytes, /) -> None:
        headers.extend(self._extra)
        self._proto.response_bytes(status, headers, body)

    def response_stream(
        self, status: int, headers: list[tuple[str, str]], first: bytes = b"", /
    ) -> StreamTransport:
        headers.extend(self._extra)
        return self._proto.response_stream(status, headers, first)

    async def client_disconnect(self) -> None:
        await self._proto.client_disconnect()
