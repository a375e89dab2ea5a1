"""An HTTPProtocol that counts the status of the answer made through it.

Applications mounted on the client port (`GatewayApp`'s `mounts`: sign-in pages and
the like) answer through it, so their responses are counted in `llmgw_requests_total`
under their mount's prefix like every other answer on the port, without those
applications knowing of the gateway's metrics. Made only for a mounted request: the
API's own routes count where they answer.
"""

from __future__ import annotations

from llmgw.http.rsgi import HTTPProtocol
from llmgw.router.metrics import GatewayMetrics
from llmgw.router.traced import StatusSeen


class CountedProtocol(StatusSeen):
    """Passes everything to `proto`, counting the response's status under `route`."""

    __slots__ = ("_metrics", "_route")

    def __init__(self, proto: HTTPProtocol, metrics: GatewayMetrics, route: str) -> None:
        super().__init__(proto)
        self._metrics = metrics
        self._route = route

    def _seen(self, status: int) -> None:
        if self.status is None:
            self.status = status
            self._metrics.served(self._route, status)
