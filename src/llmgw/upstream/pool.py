"""Kept-alive connections to one replica's address, reused across requests.

One pool per origin (scheme, host, port), one set of pools per process. Idle
connections are reused newest first, so the ones a replica has closed for idleness
sink to the bottom and are dropped when found closed.
"""

from __future__ import annotations

import asyncio
import os
import ssl
from urllib.parse import urlsplit

from llmgw.errors import DialError, DialTimeout
from llmgw.upstream.connection import Connection


class OriginPool:
    """Connections to one `scheme://host:port`."""

    def __init__(self, host: str, port: int, tls: ssl.SSLContext | None, max_idle: int = 512) -> None:
        self.host = host
        self.port = port
        self.host_header = f"{host}:{port}".encode()
        self._tls = tls
        self._idle: list[Connection] = []
        self._max_idle = max_idle

    async def acquire(self, dial_timeout: float) -> tuple[Connection, bool]:
        """A connection to use, and whether it was reused (a reused one may have been
        closed by the replica meanwhile, which is worth one silent retry)."""
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed:
                return conn, True
        return await self.dial(dial_timeout), False

    async def dial(self, dial_timeout: float) -> Connection:
        """A new connection, within `dial_timeout` seconds."""
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(dial_timeout):
                _, conn = await loop.create_connection(Connection, self.host, self.port, ssl=self._tls)
        except TimeoutError as exc:
            raise DialTimeout(dial_timeout) from exc
        except OSError as exc:
            # Only the kind of failure: asyncio's own text names the address, which is
            # internal and may reach a client inside an error message.
            reason = os.strerror(exc.errno) if exc.errno else "the connection failed"
            raise DialError(f"could not connect to a replica: {reason}") from exc
        return conn

    def release(self, conn: Connection) -> None:
        """Returns a connection whose exchange is over; keeps it only if it can be reused."""
        if conn.reusable and conn.complete and not conn.closed and len(self._idle) < self._max_idle:
            self._idle.append(conn)
        else:
            conn.close()

    def close(self) -> None:
        while self._idle:
            self._idle.pop().close()


class UpstreamClient:
    """Every origin pool of this process: one per replica address."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self._pools: dict[str, OriginPool] = {}
        self._tls = tls

    def pool_for(self, base_url: str) -> OriginPool:
        """The pool for the origin of `base_url` (its path is the caller's business)."""
        parts = urlsplit(base_url)
        scheme = parts.scheme or "http"
        port = parts.port or (443 if scheme == "https" else 80)
        host = parts.hostname or "127.0.0.1"
        key = f"{scheme}://{host}:{port}"
        pool = self._pools.get(key)
        if pool is None:
            tls = (self._tls or ssl.create_default_context()) if scheme == "https" else None
            pool = self._pools[key] = OriginPool(host, port, tls)
        return pool

    def close(self) -> None:
        for pool in self._pools.values():
            pool.close()
        self._pools.clear()
