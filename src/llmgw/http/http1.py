"""llmgw's HTTP/1.1 server connection: httptools parses, the running asyncio loop
(uvloop) moves the bytes, and each request is handed to an RSGI-shaped application
(llmgw.http.rsgi) as an `Exchange`.

Why not granian, which served the gateway first: its Rust core hands each request
to Python and back across threads, and that hand-off alone cost about 125 µs per
request on this project's machine, more than the gateway's own work (~100 µs). With
wrk at concurrency 1 in the same minute, a trivial answer took p50 about 190 µs on
granian, 110 µs on this server, 45-75 µs on a bare asyncio protocol; for the gateway
itself see bench/results/router-overhead-2026-11-29-5.md (both servers, one run).

A connection carries one request at a time. Requests a client pipelines are parsed
as they arrive and wait their turn, and reading from the socket pauses until the one
in flight is answered; so does it while the application has more unread body than
BODY_HIGH_WATER_BYTES. A body has a deadline and takes memory from the listener's
budget (llmgw.http.body_guard). A client that just waits for its answer sends nothing, so its
socket stays read and its leaving is seen at once (`client_disconnect`). Writes wait
(`drain`) while the socket's send buffer is above the transport's high-water mark.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import cast

import httptools

from llmgw.core.request_context import REQUEST_ID, minted_request_id
from llmgw.http.body_guard import BodyBudget, BodyRules, body_overdue
from llmgw.http.http1_exchange import DateHeader, Exchange, RequestHeaders, RequestScope, response_head
from llmgw.http.responses import JSON, error_body
from llmgw.http.rsgi import ProtocolClosed

log = logging.getLogger(__name__)

App = Callable[[RequestScope, Exchange], Awaitable[None]]


@dataclass(frozen=True)
class Limits:
    """What one connection may ask of the server."""

    max_request_target: int = 8 * 1024
    """Bytes of the request target (path and query); longer is answered 414."""
    max_header_bytes: int = 64 * 1024
    """Bytes of all header names and values together; more is answered 431."""
    max_headers: int = 100
    keepalive_s: float = 60.0
    """How long a connection may sit without a request (or with a request head only
    partly sent) before it is closed."""
    max_discard_bytes: int = 1024 * 1024
    """Request body left unread by an application that answered early (a 413) that is
    read and dropped to keep the connection; past it the connection is closed."""
    body: BodyRules = field(default_factory=BodyRules)
    """How long a request body may take to arrive, and the memory bodies may hold."""


# What one read from the socket may bring beyond a head within the limits (the rest of
# the read belongs to a body or the next request).
_READ_SLACK_BYTES = 256 * 1024


class _Refused(Exception):
    """A request refused while its head was parsed (raised through httptools)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class ConnectionOwner:
    """What the listener learns from its connections (llmgw.http.http1_server)."""

    def opened(self, conn: Http1Connection) -> None:
        pass

    def closed(self, conn: Http1Connection) -> None:
        pass

    def refused(self, status: int) -> None:
        """A request was answered `status` by the server in the application's stead."""


class Http1Connection(asyncio.Protocol):
    """One client connection (asyncio.Protocol and the exchanges' Wire)."""

    def __init__(
        self,
        app: App,
        owner: ConnectionOwner,
        limits: Limits,
        date: DateHeader,
        budget: BodyBudget | None = None,
    ) -> None:
        self._app = app
        self._owner = owner
        self._limits = limits
        self._date = date
        self._loop = asyncio.get_running_loop()
        self._parser = httptools.HttpRequestParser(self)
        self._transport: asyncio.Transport | None = None
        self._idle: asyncio.TimerHandle | None = None
        # The request being parsed, and its head while it is.
        self._parsing: Exchange | None = None
        self._target = b""
        self._headers: dict[str, str] = {}
        self._header_bytes = 0
        self._header_count = 0
        # The request being answered, its task, and requests parsed behind it.
        self._current: Exchange | None = None
        self.task: asyncio.Task[None] | None = None
        self._pipeline: deque[tuple[RequestScope, Exchange]] = deque()
        self._discarded = 0
        self._reading_paused = False
        self._writing_paused = False
        self._drain: asyncio.Future[None] | None = None
        self._lost: set[asyncio.Future[None]] = set()
        self._stopping = False
        self._upgraded = False
        self._in_head = True
        self._head_bytes = 0
        self._head_bound = limits.max_request_target + limits.max_header_bytes + _READ_SLACK_BYTES
        self._budget = budget if budget is not None else BodyBudget(limits.body.memory_bytes)
        # The body being received: when its clock started, and how much of it has come.
        self._body_since = 0.0
        self._body_received = 0
        # A request refused behind one in flight, answered after it (status, message).
        self._refusal: tuple[int, str] | None = None
        self._lingering = False
        self.closed = False
        self._peer = ""

    # --- asyncio.Protocol ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not subclasses of asyncio.Transport, only alike.
        self._transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self._peer = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        self._owner.opened(self)
        self._arm_idle()

    def data_received(self, data: bytes) -> None:
        if self._upgraded or self._refusal is not None or self._lingering:
            return
        if self._in_head:
            self._head_bytes += len(data)
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            # An upgrade (h2c, websocket) is not offered: the request is answered as
            # HTTP/1.1, and the connection closed after it since the bytes that follow
            # are in the other protocol.
            self._upgraded = True
            self._stopping = True
            for exchange in (self._current, self._parsing):
                if exchange is not None and not exchange.started:
                    exchange.keep_alive = False
            for _, queued in self._pipeline:
                queued.keep_alive = False
        except httptools.HttpParserError as exc:
            refused = exc.__context__
            if isinstance(refused, _Refused):
                self._refuse(refused.status, refused.message)
            else:
                self._refuse(400, f"the request is not valid HTTP/1.1: {exc}")
            return
        # httptools holds a header line until it ends, so a head that never ends would
        # grow without bound: it is cut off at what the limits allow, plus one read.
        if self._in_head and self._head_bytes > self._head_bound:
            self._refuse(431, "the request head is too large")

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._cancel_idle()
        for exchange in (self._current, self._parsing):
            if exchange is not None:
                exchange.wake()
                exchange.release()
        for _, queued in self._pipeline:
            queued.release()
        self._pipeline.clear()
        self._resolve_drain()
        for waiter in self._lost:
            if not waiter.done():
                waiter.set_result(None)
        self._lost.clear()
        self._owner.closed(self)

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._resolve_drain()

    # --- httptools callbacks ------------------------------------------------------------

    def on_message_begin(self) -> None:
        self._in_head = True
        self._target = b""
        self._headers = {}
        self._header_bytes = 0
        self._header_count = 0

    def on_url(self, url: bytes) -> None:
        self._target += url
        if len(self._target) > self._limits.max_request_target:
            raise _Refused(414, f"the request target is over {self._limits.max_request_target} bytes")

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_bytes += len(name) + len(value)
        self._header_count += 1
        if (
            self._header_bytes > self._limits.max_header_bytes
            or self._header_count > self._limits.max_headers
        ):
            raise _Refused(
                431,
                f"the request headers are over {self._limits.max_header_bytes} bytes "
                f"or {self._limits.max_headers} fields",
            )
        self._headers.setdefault(name.decode("latin-1").lower(), value.decode("latin-1"))

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._head_bytes = 0
        if self._stopping:
            return  # no new request is taken once the connection is to close
        parser = self._parser
        method = parser.get_method().decode("latin-1")
        version = parser.get_http_version()
        headers = self._headers
        if version != "1.0" and "host" not in headers:
            # RFC 9112 3.2: a server MUST answer 400 to an HTTP/1.1 request without one.
            raise _Refused(400, "the request has no Host header, which HTTP/1.1 requires")
        expect = headers.get("expect")
        exchange = Exchange(
            self,
            self._date,
            keep_alive=parser.should_keep_alive() and not self._stopping,
            head_only=method == "HEAD",
            http10=version == "1.0",
            expect_continue=expect is not None and expect.lower() == "100-continue" and version != "1.0",
            budget=self._budget,
        )
        # httptools has checked the framing: a content-length of digits only, or a
        # transfer-encoding ending in chunked, never both.
        declared = headers.get("content-length")
        if declared is not None:
            exchange.declared = int(declared)
        elif "transfer-encoding" in headers:
            exchange.declared = -1
        self._body_since = self._loop.time()
        self._body_received = 0
        scope = RequestScope(method, self._target, RequestHeaders(self._headers), version, self._peer)
        self._parsing = exchange
        if self._current is None:
            self._begin(scope, exchange)
        else:
            self._pipeline.append((scope, exchange))
            self._update_reading()

    def on_body(self, body: bytes) -> None:
        exchange = self._parsing
        if exchange is None:
            return
        if exchange.started and exchange is not self._current:
            # Answered already: the rest of the body is read only to keep the connection.
            self._discarded += len(body)
            if self._discarded > self._limits.max_discard_bytes:
                self._close()
            return
        self._body_received += len(body)
        if exchange.declared < 0 and exchange is self._current and not exchange.started:
            # A chunked body has no size to reserve up front: it takes from the budget
            # as it comes.
            if not self._budget.reserve(len(body), exchange.reserved):
                raise _Refused(503, _BUDGET_FULL)
            exchange.reserved += len(body)
        exchange.feed(body)
        if exchange.over_high_water:
            self._update_reading()

    def on_message_complete(self) -> None:
        exchange = self._parsing
        self._parsing = None
        if exchange is not None:
            exchange.finish()
            if exchange.started and exchange is not self._current:
                self._next()

    # --- the exchanges' Wire --------------------------------------------------------------

    def write(self, data: bytes) -> None:
        if not self.closed and self._transport is not None:
            self._transport.write(data)

    async def drain(self) -> None:
        if not self._writing_paused:
            return
        if self.closed:
            raise ProtocolClosed("the client closed the connection")
        # One request at a time means one writer: one waiter, its own future, so a
        # writer cancelled while it waits leaves nothing cancelled behind.
        waiter = self._drain = self._loop.create_future()
        try:
            await waiter
        finally:
            self._drain = None
        if self.closed:
            raise ProtocolClosed("the client closed the connection")

    async def lost(self) -> None:
        if self.closed:
            return
        waiter = self._loop.create_future()
        self._lost.add(waiter)
        try:
            await waiter
        finally:
            self._lost.discard(waiter)

    def body_read(self) -> None:
        if self._reading_paused:
            self._update_reading()

    # --- the listener's side ------------------------------------------------------------

    def shutdown(self) -> None:
        """Graceful stop: an idle connection closes now, a busy one after its answer."""
        self._stopping = True
        if self._current is None:
            self._close()
            return
        if not self._current.started:
            self._current.keep_alive = False
        self._pipeline.clear()

    def abort(self) -> None:
        """The stop's grace is over: the request in flight is cancelled, the socket dropped."""
        if self.task is not None:
            self.task.cancel()
        if self._transport is not None:
            self._transport.abort()

    @property
    def busy(self) -> bool:
        return self._current is not None

    # --- running the exchanges --------------------------------------------------------

    def _begin(self, scope: RequestScope, exchange: Exchange) -> None:
        self._cancel_idle()
        self._current = exchange
        if exchange.declared > 0 and not exchange.body_complete and not self._reserve(exchange):
            return
        self.task = self._loop.create_task(self._run(scope, exchange))

    def _reserve(self, exchange: Exchange) -> bool:
        """Reserves the declared body in the budget, or answers 503 in the
        application's stead (False)."""
        size = min(exchange.declared, self._limits.body.max_body_bytes)
        if self._budget.reserve(size):
            exchange.reserved = size
            return True
        exchange.response_bytes(503, _refusal_headers(503), _budget_full_body())
        self._owner.refused(503)
        self._answered(exchange)
        return False

    async def _run(self, scope: RequestScope, exchange: Exchange) -> None:
        try:
            await self._app(scope, exchange)
        except Exception:
            # Handled without an `as` name, so no frame of this long-lived coroutine
            # holds the exception (and through its traceback, the request's objects).
            self._failed(scope, exchange)
        finally:
            self._answered(exchange)

    def _failed(self, scope: RequestScope, exchange: Exchange) -> None:
        if self.closed and isinstance(sys.exception(), ProtocolClosed):
            return  # the client left while its request body was read
        log.exception("%s %s failed", scope.method, scope.path)
        if self.closed:
            return
        if not exchange.started:
            exchange.keep_alive = False
            exchange.response_bytes(
                500,
                _failure_headers(),
                error_body(
                    "the gateway failed to answer this request", "server_error", code="internal_error"
                ),
            )
            self._owner.refused(500)
        else:
            # A response already begun cannot be turned into an error: cut it short, so
            # the client sees it incomplete rather than complete.
            self._close()

    def _answered(self, exchange: Exchange) -> None:
        self.task = None
        if exchange.reserved:
            exchange.release()
        if not exchange.started and not self.closed:
            log.error("the application returned without answering the request")
            exchange.keep_alive = False
            exchange.response_bytes(
                500,
                _failure_headers(),
                error_body("no response", "server_error", code="internal_error"),
            )
            self._owner.refused(500)
        if exchange.stream is not None:
            exchange.stream.end()
        self._current = None
        if not exchange.keep_alive or self.closed:
            self._close()
        elif exchange.expect_continue and not exchange.body_complete:
            # Never asked for, so the body may or may not follow: only closing leaves
            # no doubt about where the next request would begin.
            self._close()
        elif exchange.body_complete:
            self._next()
        else:
            # The application answered before reading all of the body (a 413): the rest
            # is read and dropped, and the next request follows it.
            self._discarded = 0
            self._arm_idle()
            self._update_reading()

    def _next(self) -> None:
        if self._stopping:
            self._close()
        elif self._pipeline:
            scope, exchange = self._pipeline.popleft()
            self._begin(scope, exchange)
            self._update_reading()
        elif self._refusal is not None:
            self._write_refusal(*self._refusal)
            self._linger()
        else:
            self._arm_idle()
            self._update_reading()

    def _refuse(self, status: int, message: str) -> None:
        """A request that cannot be parsed (or whose body is late, or over the budget):
        answered with `status` in its turn, and the connection closed after it. Requests
        parsed before it are answered first; a response already begun for it is cut
        short instead, since it cannot be turned into an error."""
        current, parsing = self._current, self._parsing
        self._parsing = None
        if not self.closed:
            self._owner.refused(status)
        if parsing is not None and self._pipeline and self._pipeline[-1][1] is parsing:
            self._pipeline.pop()  # queued with a bad body: never served
            parsing.release()
        if current is None or self.closed:
            self._stopping = True
            self._write_refusal(status, message)
            self._linger()
        elif current is parsing:
            self._stopping = True
            self._pipeline.clear()
            if not current.started:
                # The application is waiting for this body: it learns the connection is
                # gone (ProtocolClosed), and the client learns why.
                current.keep_alive = False
                current.response_bytes(status, _refusal_headers(status), _refusal_body(status, message))
            self._linger()
            current.wake()
        else:
            self._refusal = (status, message)
            self._update_reading()

    def _write_refusal(self, status: int, message: str) -> None:
        if not self.closed:
            body = _refusal_body(status, message)
            framing = f"content-length: {len(body)}\r\n"
            self.write(
                response_head(status, _refusal_headers(status), framing, self._date.line(), True) + body
            )

    def check_body(self, now: float) -> None:
        """Refuses the body being received with 408 when it is past its deadline (the
        listener's sweep calls this every `body_guard.SWEEP_S`). The clock stands still
        while the body is not the client's to send: the server has paused reading, or
        the client waits for its 100 Continue."""
        exchange = self._parsing
        if exchange is None or exchange is not self._current or self.closed:
            return  # none, or queued behind another (reading is paused), or left unread
        if self._reading_paused or exchange.expect_continue:
            self._body_since = now
            self._body_received = 0
        elif body_overdue(self._limits.body, self._body_since, self._body_received, now):
            self._refuse(
                408,
                "the request body did not arrive in time "
                "(router.timeouts.body and router.timeouts.body_min_rate)",
            )

    def _update_reading(self) -> None:
        transport = self._transport
        if transport is None or self.closed:
            return
        current = self._current
        pause = (
            bool(self._pipeline)
            or (current is not None and current.over_high_water)
            or self._refusal is not None
        )
        if pause != self._reading_paused:
            self._reading_paused = pause
            if pause:
                transport.pause_reading()
            else:
                transport.resume_reading()

    def _arm_idle(self) -> None:
        self._cancel_idle()
        self._idle = self._loop.call_later(self._limits.keepalive_s, self._close)

    def _cancel_idle(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None

    def _resolve_drain(self) -> None:
        drain = self._drain
        self._drain = None
        if drain is not None and not drain.done():
            drain.set_result(None)

    def _linger(self) -> None:
        """Closes after a refusal without losing it: closing a socket with unread bytes
        (the rest of a refused body) makes the kernel send a reset, which can reach the
        client before the answer. So the answer is followed by a FIN, what the client
        still sends is read and dropped, and the socket closed once the client closes
        or after LINGER_S."""
        self.closed = True
        transport = self._transport
        if transport is None or transport.is_closing() or self._lingering:
            return
        self._lingering = True
        if transport.can_write_eof():
            transport.write_eof()
        if self._reading_paused:
            self._reading_paused = False
            transport.resume_reading()
        self._cancel_idle()
        self._idle = self._loop.call_later(LINGER_S, transport.close)

    def _close(self) -> None:
        if self._lingering:
            return  # closes on its own
        # Closed to the exchanges at once (nothing more is written, a stream's sender
        # gets ProtocolClosed); the transport still sends what it holds, then closes.
        self.closed = True
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()


LINGER_S = 2.0
"""How long a refused connection's late bytes are read and dropped before it closes."""

_BUDGET_FULL = (
    "the gateway holds as many request bodies as its memory budget allows "
    "(router.max_body_memory_bytes); retry shortly"
)


def _budget_full_body() -> bytes:
    return error_body(_BUDGET_FULL, "service_unavailable", code="body_memory_full")


def _refusal_headers(status: int) -> list[tuple[str, str]]:
    """A refusal made before any application saw the request: its id is minted here,
    so this answer too can be found in the logs by the id the client got."""
    headers = [("content-type", JSON), ("x-request-id", minted_request_id())]
    if status == 503:
        headers.append(("retry-after", "1"))  # a full budget empties as bodies arrive, in about a second
    return headers


def _failure_headers() -> list[tuple[str, str]]:
    """A 500 made in the application's stead, in the request's task: the id the
    application gave the request (llmgw.core.request_context), so the answer and the
    logged traceback share it."""
    return [("content-type", JSON), ("x-request-id", REQUEST_ID.get() or minted_request_id())]


def _refusal_body(status: int, message: str) -> bytes:
    if status == 503:
        return _budget_full_body()
    if status == 408:
        return error_body(message, "invalid_request_error", code="body_timeout")
    return error_body(message, "invalid_request_error", code="bad_http")
