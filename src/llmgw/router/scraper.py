"""Reading every replica's `/metrics` on a timer, so scoring sees queues and KV use.

Every `router.scrape_interval` each replica is asked, all at once, each within
`router.scrape_timeout`. A replica that does not answer keeps its last reading, which
ages; scoring treats a reading older than `router.stale_after` as unknown. External
providers publish no metrics and are not asked.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from llmgw.engines.load import read_load
from llmgw.errors import UpstreamError
from llmgw.router.endpoints import Endpoint, EndpointRegistry

log = logging.getLogger(__name__)


class Scraper:
    """The scrape loop over the registry's endpoints."""

    def __init__(
        self,
        endpoints: EndpointRegistry,
        interval: float,
        timeout: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._endpoints = endpoints
        self._interval = interval
        self._timeout = timeout
        self._clock = clock
        self.rounds = 0

    async def scrape(self, endpoint: Endpoint) -> bool:
        """Reads one replica's load; False when it could not be read."""
        head = b"".join(
            (
                b"GET ",
                endpoint.path_prefix,
                b"/metrics HTTP/1.1\r\nHost: ",
                endpoint.pool.host_header,
                b"\r\n",
                endpoint.auth_header,
                b"Accept: text/plain\r\n\r\n",
            )
        )
        conn = None
        try:
            async with asyncio.timeout(self._timeout):
                conn, _ = await endpoint.pool.acquire(self._timeout)
                status = await conn.exchange(head, b"")
                text = await conn.read_body()
        except (TimeoutError, UpstreamError) as exc:
            if conn is not None:
                conn.close()
            log.debug("scrape of %s failed: %s", endpoint.id, exc)
            return False
        except BaseException:
            # Cancelled (the gateway stopping) mid-exchange: the socket is closed, not leaked.
            if conn is not None:
                conn.close()
            raise
        endpoint.pool.release(conn)
        if status != 200:
            return False
        endpoint.load = read_load(text, endpoint.metric_names)
        endpoint.scraped_at = self._clock()
        return True

    async def scrape_all(self) -> int:
        """One round over every replica; returns how many answered."""
        targets = [e for e in self._endpoints.all() if not e.spec.external]
        results = await asyncio.gather(*(self.scrape(e) for e in targets))
        self.rounds += 1
        return sum(results)

    async def run(self) -> None:
        """Scrapes until cancelled."""
        while True:
            started = self._clock()
            await self.scrape_all()
            await asyncio.sleep(max(0.0, self._interval - (self._clock() - started)))
