"""An HTTPProtocol that counts the status of the answer made through it.

Applications mounted on the client port (`GatewayApp`'s `mounts`: sign-in pages and
the like) answer through it, so their responses are counted in `llmgw_requests_total`
under their mount's prefix like every other answer on the port, without those
applications knowing of the gateway's metrics. Made only for a mounted request: the
API's own routes count where they answer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from llmgw.http.rsgi import HTTPProtocol, StreamTransport
from llmgw.router.metrics import GatewayMetrics


class CountedProtocol:
    """Passes everything to `proto`, counting the response's status under `route`."""

    __slots__ = ("_metrics", "_proto", "_route", "status")

    def __init__(self, proto: HTTPProtocol, metrics: GatewayMetrics, route: str) -> None:
        self._proto = proto
        self._metrics = metrics
        self._route = route
        self.status: int | None = None
        """The status answered, once the application has answered."""

    async def __call__(self) -> bytes:
        return await self._proto()

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._proto.__aiter__()

    def response_bytes(self, status: int, headers: list[tuple[str, str]], body: bytes, /) -> None:
        self._counted(status)
        self._proto.response_bytes(status, headers, body)

    def response_stream(
        self, status: int, headers: list[tuple[str, str]], first: bytes = b"", /
    ) -> StreamTransport:
        self._counted(status)
        return self._proto.response_stream(status, headers, first)

    async def client_disconnect(self) -> None:
        await self._proto.client_disconnect()

    def _counted(self, status: int) -> None:
        if self.status is None:
            self.status = status
            self._metrics.served(self._route, status)
