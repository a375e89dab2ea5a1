"""One try of one request on one replica.

A try is split where retrying stops being possible. Everything up to the first bytes
of an answer (connecting, sending, the status line, for a stream its first event) can
fail and be tried again elsewhere, because the client has been sent nothing. From the
first byte written to the client on, a failure ends the stream with an error event.

Each phase has its own bound (`router.timeouts`), raised as its own error type:
dial, response_header (a stream's headers come before generation starts, so this is a
liveness check), generation (a whole non-streaming answer; 0 is no bound but total,
with the replica's liveness checked every response_header: see `liveness`),
first_token, idle (the gap between two pieces of a stream) and total. Where what is
left of total is nearer than a phase's own bound (or the phase has none), the wait is
bounded by total and a timeout names total: the error names the bound that fired.
The connection and its deadline belong to the try's `Attempt`, which the caller ends.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmgw.errors import (
    FirstTokenTimeout,
    GenerationTimeout,
    HeaderTimeout,
    IdleTimeout,
    NotAStream,
    PhaseTimeout,
    TotalTimeout,
    UpstreamClosed,
    UpstreamStatus,
)
from llmgw.router.attempt import Attempt
from llmgw.router.endpoints import Endpoint
from llmgw.router.liveness import Liveness
from llmgw.upstream import Connection


@dataclass(frozen=True, slots=True)
class PhaseLimits:
    """`router.timeouts` in seconds (0: only `total` bounds the phase), and
    `router.stale_after`, within which a replica's metrics must have been read for a
    non-streamed answer without a generation bound to be waited for past response_header."""

    dial_s: float
    response_header_s: float
    generation_s: float
    first_token_s: float
    idle_s: float
    total_s: float
    replica_fresh_s: float


def bounded(
    seconds: float, phase: type[PhaseTimeout], left: float, total: float
) -> tuple[float, type[PhaseTimeout], float]:
    """How long one phase may wait: its own bound, or what is `left` of total when that
    is nearer or the phase has none; with the error to raise and the setting's value it
    names, so a 504 names the bound that fired."""
    if 0 < seconds <= left:
        return seconds, phase, seconds
    return left, TotalTimeout, total


def retryable_status(status: int) -> bool:
    """Statuses another replica may answer differently: overload and server faults, and
    a refusal of the gateway's own key (401, 403: an engine's or a provider's), which
    another replica's key may pass. A replica's other 4xx is about the request."""
    return status == 429 or status >= 500 or status in (401, 403)


def request_head(
    endpoint: Endpoint, path: bytes, body_length: int, request_id: bytes, extra: bytes = b""
) -> bytes:
    """The request line and headers to a replica; `extra` is further header lines (the
    trace context), each ending in CRLF."""
    return b"".join(
        (
            b"POST ",
            endpoint.path_prefix,
            path,
            b" HTTP/1.1\r\nHost: ",
            endpoint.pool.host_header,
            b"\r\nContent-Type: application/json\r\nContent-Length: ",
            str(body_length).encode(),
            b"\r\n",
            endpoint.auth_header,
            b"X-Request-Id: ",
            request_id,
            b"\r\n",
            extra,
            b"\r\n",
        )
    )


def content_type_of(conn: Connection) -> str:
    for name, value in conn.headers:
        if name.lower() == b"content-type":
            return value.decode("latin-1")
    return "application/json"


def is_event_stream(conn: Connection) -> bool:
    """Whether a streaming answer is an event stream: its content type says so (or it
    names none, as some small servers do)."""
    for name, value in conn.headers:
        if name.lower() == b"content-type":
            return value.partition(b";")[0].strip().lower() == b"text/event-stream"
    return True


@dataclass(slots=True)
class Answer:
    """A complete non-streaming answer (or a replica's own refusal, passed through)."""

    status: int
    content_type: str
    body: bytes


async def fetch(
    attempt: Attempt,
    head: bytes,
    body: bytes,
    limits: PhaseLimits,
    budget: float,
    liveness: Liveness | None = None,
) -> Answer:
    """A non-streaming try: the whole answer within generation (or what is left of total;
    without a generation bound, checked for liveness every response_header)."""
    now = attempt.loop.time()
    every = limits.response_header_s
    if liveness is None or limits.generation_s > 0 or not 0 < every < budget:
        bound, phase, named = bounded(limits.generation_s, GenerationTimeout, budget, limits.total_s)
        conn = await attempt.send(head, body, limits.dial_s, now + bound, phase, named)
    else:
        conn = await attempt.send(
            head, body, limits.dial_s, now + every, HeaderTimeout, every, liveness, now + budget
        )
    data = await attempt.read_body()
    attempt.end()
    if retryable_status(conn.status):
        raise UpstreamStatus(conn.status, data)
    return Answer(conn.status, content_type_of(conn), data)


@dataclass(slots=True)
class OpenStream:
    """A stream whose first bytes have arrived; nothing has been sent to the client yet.
    Its attempt's watch stays armed: the relay moves it along for the idle and total
    bounds."""

    attempt: Attempt
    conn: Connection
    first: bytes


async def open_stream(
    attempt: Attempt, head: bytes, body: bytes, limits: PhaseLimits, budget: float
) -> OpenStream | Answer:
    """A streaming try up to its first bytes. A replica that answers with an error
    status instead of a stream gives an `Answer`, passed to the client as it is. One
    that answers 200 with another body (JSON, plain text) failed this try: nothing has
    been sent, and relaying it as a stream would glue an error event onto it."""
    loop = attempt.loop
    end = loop.time() + budget
    bound, phase, named = bounded(limits.response_header_s, HeaderTimeout, budget, limits.total_s)
    conn = await attempt.send(head, body, limits.dial_s, loop.time() + bound, phase, named)
    if conn.status != 200:
        bound, phase, named = bounded(limits.idle_s, IdleTimeout, end - loop.time(), limits.total_s)
        attempt.move_in(bound, phase, named)
        data = await attempt.read_body()
        attempt.end()
        if retryable_status(conn.status):
            raise UpstreamStatus(conn.status, data)
        return Answer(conn.status, content_type_of(conn), data)
    if not is_event_stream(conn):
        raise NotAStream(f"the replica answered a streaming request with {content_type_of(conn)!r}")
    bound, phase, named = bounded(limits.first_token_s, FirstTokenTimeout, end - loop.time(), limits.total_s)
    attempt.move_in(bound, phase, named)
    first = await conn.read_available()
    if first is None:
        raise UpstreamClosed("the replica ended the stream before sending anything")
    if attempt.span is not None:
        attempt.span.add_event("first_byte")
    return OpenStream(attempt, conn, first)
