"""One request and its response on an HTTP/1.1 connection, as the gateway's
applications see it (the Protocols in llmgw.http.rsgi).

The connection (llmgw.http.http1) parses the request and feeds its body here; the
application reads the body and answers through this object. What touches the socket
goes through the connection's small `Wire` surface, so this module holds the HTTP
semantics (framing, keep-alive, the head's bytes) and none of the socket handling.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import deque
from collections.abc import Callable
from email.utils import formatdate
from http import HTTPStatus
from typing import Protocol
from urllib.parse import unquote

from llmgw.http.body_guard import BodyBudget
from llmgw.http.rsgi import ProtocolClosed

# Past this many unread body bytes the client's socket is paused until the
# application catches up (unless it asked for the whole body at once).
BODY_HIGH_WATER_BYTES = 256 * 1024

_CHUNKED_END = b"0\r\n\r\n"
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


class Wire(Protocol):
    """What an exchange needs from its connection."""

    closed: bool

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None:
        """Returns once the socket's send buffer is below its high-water mark; raises
        ProtocolClosed if the connection is lost meanwhile."""
        ...

    async def lost(self) -> None:
        """Returns once the connection is lost."""
        ...

    def body_read(self) -> None:
        """The application consumed buffered body bytes: reading may resume."""
        ...


class RequestHeaders:
    """Request headers by lower-case name; the first of repeated ones wins, as granian's did."""

    __slots__ = ("_values",)

    def __init__(self, values: dict[str, str]) -> None:
        self._values = values

    def get(self, name: str, default: str | None = None) -> str | None:
        return self._values.get(name.lower(), default)

    def __contains__(self, name: str) -> bool:
        return name.lower() in self._values


class RequestScope:
    """Method, target and headers of one request."""

    __slots__ = ("client", "headers", "http_version", "method", "path", "query_string")

    proto = "http"

    def __init__(
        self, method: str, target: bytes, headers: RequestHeaders, http_version: str, client: str = ""
    ) -> None:
        self.client = client
        """The peer's IP address (not part of the `Scope` protocol: read it with getattr)."""
        self.method = method
        raw_path, _, query = target.partition(b"?")
        path = raw_path.decode("latin-1")
        self.path = decode_path(path) if "%" in path else path
        self.query_string = query.decode("latin-1")
        self.headers = headers
        self.http_version = http_version


_ENCODED_SLASH = re.compile("%2f", re.IGNORECASE)


def decode_path(path: str) -> str:
    """`path` with its %-escapes decoded, but for an encoded slash, which stays `%2F`:
    decoded, `/v1/chat%2Fcompletions` would be routed as `/v1/chat/completions`, a
    path the client did not send (and one a proxy in front, matching on the raw path,
    did not see)."""
    parts = _ENCODED_SLASH.split(path)
    return unquote(path) if len(parts) == 1 else "%2F".join([unquote(part) for part in parts])


# --- the response head ------------------------------------------------------------------

_STATUS_LINES: dict[int, str] = {s.value: f"HTTP/1.1 {s.value} {s.phrase}\r\n" for s in HTTPStatus}


def status_line(status: int) -> str:
    line = _STATUS_LINES.get(status)
    return line if line is not None else f"HTTP/1.1 {status} \r\n"


class DateHeader:
    """The `date` header line, formatted once per second of `clock` (HTTP/1.1 asks an
    origin server with a clock to send one; formatting it per response would cost more
    than the rest of the head)."""

    __slots__ = ("_clock", "_line", "_second")

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._second = -1
        self._line = ""

    def line(self) -> str:
        second = int(self._clock())
        if second != self._second:
            self._second = second
            self._line = f"date: {formatdate(second, usegmt=True)}\r\n"
        return self._line


def response_head(status: int, headers: list[tuple[str, str]], framing: str, date: str, close: bool) -> bytes:
    """The response's status line and headers, ending with the blank line. `framing` is
    the content-length or transfer-encoding line the server chose."""
    fields = "".join([f"{name}: {value}\r\n" for name, value in headers])
    # A line break inside a name or value would let it write headers of its own.
    if fields.count("\n") != len(headers) or fields.count("\r") != len(headers):
        raise ValueError("a response header name or value holds a line break")
    return (
        status_line(status) + fields + framing + date + ("connection: close\r\n\r\n" if close else "\r\n")
    ).encode()


def _frame(data: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(data), data)


class ChunkedStream:
    """The body of a streamed response (StreamTransport): chunked, or for an HTTP/1.0
    client raw bytes ended by closing the connection, or nothing for a HEAD request."""

    __slots__ = ("_chunked", "_silent", "_wire")

    def __init__(self, wire: Wire, *, chunked: bool, silent: bool) -> None:
        self._wire = wire
        self._chunked = chunked and not silent
        self._silent = silent

    def framed(self, data: bytes) -> bytes:
        """`data` as it goes on the wire: a chunk, the bytes themselves (HTTP/1.0), or
        nothing (a HEAD request, or no data: an empty chunk would end the body)."""
        if not data or self._silent:
            return b""
        return _frame(data) if self._chunked else data

    async def send_bytes(self, data: bytes) -> None:
        wire = self._wire
        if wire.closed:
            raise ProtocolClosed("the client closed the connection")
        framed = self.framed(data)
        if framed:
            wire.write(framed)
            await wire.drain()

    def end(self) -> None:
        if self._chunked and not self._wire.closed:
            self._wire.write(_CHUNKED_END)


class Exchange:
    """The HTTPProtocol of one request: its body as it arrives, and its response."""

    __slots__ = (
        "_budget",
        "_buffered",
        "_date",
        "_parts",
        "_reading_all",
        "_waiter",
        "_wire",
        "body_complete",
        "declared",
        "expect_continue",
        "head_only",
        "http10",
        "keep_alive",
        "reserved",
        "started",
        "stream",
    )

    def __init__(
        self,
        wire: Wire,
        date: DateHeader,
        *,
        keep_alive: bool,
        head_only: bool,
        http10: bool,
        expect_continue: bool = False,
        budget: BodyBudget | None = None,
    ) -> None:
        self._wire = wire
        self._budget = budget
        self.reserved = 0
        """Bytes of `budget` held for this request's body until the application has it."""
        self.declared = 0
        """The body's content-length; -1 for a chunked body, 0 for none."""
        self._date = date
        self._parts: deque[bytes] = deque()
        self._buffered = 0
        self._waiter: asyncio.Future[None] | None = None
        self._reading_all = False
        self.body_complete = False
        self.expect_continue = expect_continue
        """The client waits for a 100 Continue before it sends its body: sent when the
        application first reads the body, so a request refused on its head alone (a 413
        on its content-length) never has its body sent."""
        self.keep_alive = keep_alive
        self.head_only = head_only
        self.http10 = http10
        self.started = False
        self.stream: ChunkedStream | None = None

    # --- fed by the connection ----------------------------------------------------------

    def feed(self, part: bytes) -> None:
        self._parts.append(part)
        self._buffered += len(part)
        self._wake()

    def finish(self) -> None:
        self.body_complete = True
        self._wake()

    def wake(self) -> None:
        """The connection was lost: a reader waiting for more body learns it."""
        self._wake()

    @property
    def over_high_water(self) -> bool:
        return self._buffered > BODY_HIGH_WATER_BYTES and not self._reading_all

    # --- the request body (HTTPProtocol) ------------------------------------------------

    async def __call__(self) -> bytes:
        self._reading_all = True
        self._wire.body_read()
        if self.expect_continue:
            self._continue()
        while not self.body_complete:
            await self._more()
        parts = self._parts
        body = parts[0] if len(parts) == 1 else b"".join(parts)
        parts.clear()
        self._buffered = 0
        if self.reserved:
            self.release()
        return body

    def __aiter__(self) -> Exchange:
        return self

    async def __anext__(self) -> bytes:
        if self.expect_continue:
            self._continue()
        while not self._parts:
            if self.body_complete:
                if self.reserved:
                    self.release()
                raise StopAsyncIteration
            await self._more()
        part = self._parts.popleft()
        self._buffered -= len(part)
        self._wire.body_read()
        return part

    def release(self) -> None:
        """Gives back what the body held of the budget: the application has it all, or
        the request is over."""
        if self._budget is not None:
            self._budget.release(self.reserved)
        self.reserved = 0

    def _continue(self) -> None:
        self.expect_continue = False
        if not self.body_complete and not self.started:
            self._wire.write(_CONTINUE)

    async def _more(self) -> None:
        if self._wire.closed:
            raise ProtocolClosed("the client closed the connection before its request body was complete")
        waiter = self._waiter = asyncio.get_running_loop().create_future()
        try:
            await waiter
        finally:
            self._waiter = None

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # --- the response (HTTPProtocol) ----------------------------------------------------

    def response_bytes(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self._start()
        head = response_head(
            status, headers, f"content-length: {len(body)}\r\n", self._date.line(), not self.keep_alive
        )
        self._wire.write(head if self.head_only or not body else head + body)

    def response_stream(
        self, status: int, headers: list[tuple[str, str]], first: bytes = b""
    ) -> ChunkedStream:
        self._start()
        # HTTP/1.0 has no chunked encoding: the body ends where the connection does.
        chunked = not self.http10
        if not chunked:
            self.keep_alive = False
        framing = "transfer-encoding: chunked\r\n" if chunked else ""
        head = response_head(status, headers, framing, self._date.line(), not self.keep_alive)
        self.stream = ChunkedStream(self._wire, chunked=chunked, silent=self.head_only)
        # One write for the head and what of the body is here already: a write is a system
        # call and a segment for the client to wake up for (at concurrency 1, a stream's
        # head, events and end cost a write each).
        self._wire.write(head + self.stream.framed(first) if first else head)
        return self.stream

    async def client_disconnect(self) -> None:
        await self._wire.lost()

    def _start(self) -> None:
        if self.started:
            if self._wire.closed:
                # Answered by the server itself (a bad or late body), which then closed.
                raise ProtocolClosed("the request was refused by the server and the connection closed")
            raise RuntimeError("this request was already answered")
        self.started = True
