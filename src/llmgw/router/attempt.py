"""One try's connection to one replica, and the deadline that guards it, in one owner.

A try takes a connection from its replica's pool, arms a watchdog entry for it, moves
that entry from phase to phase (status line, body, first token, idle gaps), and at
the end disarms the entry and gives the connection back to the pool (the answer was
read whole) or closes it (anything else: a timeout, a cut stream, a client that left,
a cancellation). All of that happens here and nowhere else, so a reader of `forward`
and `dispatch` sees phases and bounds, and `end` is the only way out: it is
idempotent, and the code that makes an attempt calls it in a `finally`, so no path
leaks a connection or leaves a watch armed.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from llmgw.errors import PhaseTimeout, UpstreamClosed
from llmgw.router.endpoints import Endpoint
from llmgw.router.liveness import Liveness
from llmgw.upstream import Connection
from llmgw.upstream.watchdog import Watch, Watchdog

if TYPE_CHECKING:
    from opentelemetry.trace import Span


class Attempt:
    """The connection and watch of one try on `endpoint`, until `end`: `whole` (set once
    the answer was read to its end and found good) decides between back to the pool
    and closed. `span`, for a traced request, is the try's `upstream` span, which
    its phases are marked on as events (its owner, the dispatcher, ends it)."""

    __slots__ = ("conn", "endpoint", "loop", "span", "watch", "watchdog", "whole")

    def __init__(self, endpoint: Endpoint, watchdog: Watchdog) -> None:
        self.endpoint = endpoint
        self.watchdog = watchdog
        self.loop = asyncio.get_running_loop()
        self.conn: Connection | None = None
        self.watch: Watch | None = None
        self.whole = False
        self.span: Span | None = None

    async def send(
        self,
        head: bytes,
        body: bytes,
        dial_s: float,
        deadline: float,
        phase: type[PhaseTimeout],
        named: float,
        renew: Liveness | None = None,
        until: float = 0.0,
    ) -> Connection:
        """Sends the request and waits for the status line until `deadline` (loop
        time; failing with `phase(named)`, unless `renew` moves it on, up to `until`).

        A kept-alive connection the replica closed meanwhile is replaced once, silently:
        that is the pool's staleness, not the replica's failure."""
        conn, reused = await self.endpoint.pool.acquire(dial_s)
        span = self.span
        if span is not None:
            span.add_event("connected", {"llmgw.reused": reused})
        self._own(conn, deadline, phase, named, renew, until)
        try:
            await conn.exchange(head, body)
        except UpstreamClosed:
            if not reused:
                raise
            self.end()
            conn = await self.endpoint.pool.dial(dial_s)
            if span is not None:
                span.add_event("connected", {"llmgw.reused": False})
            self._own(conn, deadline, phase, named, renew, until)
            await conn.exchange(head, body)
        if span is not None:
            span.add_event("headers")
            span.set_attribute("http.response.status_code", conn.status)
        return conn

    def _own(
        self,
        conn: Connection,
        deadline: float,
        phase: type[PhaseTimeout],
        named: float,
        renew: Liveness | None,
        until: float,
    ) -> None:
        self.conn = conn
        watch = self.watch = self.watchdog.arm(conn, deadline, phase, named)
        if renew is not None:
            watch.renew = renew
            watch.subject = self.endpoint
            watch.until = until

    def move_in(self, seconds: float, phase: type[PhaseTimeout], named: float) -> None:
        """The next wait ends `seconds` from now, failing with `phase(named)`."""
        self.move_at(self.loop.time() + seconds, phase, named)

    def move_at(self, deadline: float, phase: type[PhaseTimeout], named: float) -> None:
        """The next wait ends at `deadline` (loop time), failing with `phase(named)`."""
        watch = self.watch
        if watch is not None:
            watch.move(deadline, phase, named)

    async def read_body(self) -> bytes:
        """The whole body; the answer is then whole, and its connection reusable."""
        assert self.conn is not None
        data = await self.conn.read_body()
        self.whole = True
        return data

    def end(self) -> None:
        """Disarms the watch and gives the connection back (`whole`) or closes it. The
        one way out; later calls do nothing."""
        watch = self.watch
        if watch is not None:
            self.watch = None
            self.watchdog.disarm(watch)
        conn = self.conn
        if conn is not None:
            self.conn = None
            if self.whole:
                self.endpoint.pool.release(conn)
            else:
                conn.close()
