"""One try of one request on one replica.

A try is split where retrying stops being possible. Everything up to the first bytes
of an answer (connecting, sending, the status line, for a stream its first event) can
fail and be tried again elsewhere, because the client has been sent nothing. From the
first byte written to the client on, a failure ends the stream with an error event.

Each phase has its own bound (`router.timeouts`), raised as its own error type:
dial, response_header (a stream's headers come before generation starts, so this is a
liveness check), generation (a whole non-streaming answer; 0 is no bound but total),
first_token, idle (the gap between two pieces of a stream) and total.
"""

from __future__ import annotations

import asyncio
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
from llmgw.router.endpoints import Endpoint
from llmgw.upstream import Connection
from llmgw.upstream.watchdog import Watch, Watchdog


@dataclass(frozen=True, slots=True)
class PhaseLimits:
    """`router.timeouts` in seconds; 0 for generation means only `total` bounds it."""

    dial: float
    response_header: float
    generation: float
    first_token: float
    idle: float
    total: float


def retryable_status(status: int) -> bool:
    """Statuses another replica may answer differently: overload and server faults, and
    a refusal of the gateway's own key (401, 403: an engine's or a provider's), which
    another replica's key may pass. A replica's other 4xx is about the request."""
    return status == 429 or status >= 500 or status in (401, 403)


def request_head(endpoint: Endpoint, path: bytes, body_length: int, request_id: bytes) -> bytes:
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
            b"\r\n\r\n",
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


async def _send(
    endpoint: Endpoint,
    head: bytes,
    body: bytes,
    limits: PhaseLimits,
    watchdog: Watchdog,
    phase: type[PhaseTimeout],
    bound: float,
) -> tuple[Connection, Watch]:
    """Sends the request and waits for the status line, within `bound` seconds of now.

    A kept-alive connection the replica closed meanwhile is replaced once, silently:
    that is the pool's staleness, not the replica's failure."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + bound
    conn, reused = await endpoint.pool.acquire(limits.dial)
    watch = watchdog.arm(conn, deadline, phase, bound)
    try:
        await conn.exchange(head, body)
    except UpstreamClosed:
        watchdog.disarm(watch)
        conn.close()
        if not reused:
            raise
        conn = await endpoint.pool.dial(limits.dial)
        watch = watchdog.arm(conn, deadline, phase, bound)
        try:
            await conn.exchange(head, body)
        except BaseException:
            watchdog.disarm(watch)
            conn.close()
            raise
    except BaseException:
        watchdog.disarm(watch)
        conn.close()
        raise
    return conn, watch


@dataclass(slots=True)
class Answer:
    """A complete non-streaming answer (or a replica's own refusal, passed through)."""

    status: int
    content_type: str
    body: bytes


async def fetch(
    endpoint: Endpoint, head: bytes, body: bytes, limits: PhaseLimits, budget: float, watchdog: Watchdog
) -> Answer:
    """A non-streaming try: the whole answer within generation (or what is left of total)."""
    bound = min(limits.generation, budget) if limits.generation > 0 else budget
    phase = GenerationTimeout if limits.generation > 0 and limits.generation <= budget else TotalTimeout
    conn, watch = await _send(endpoint, head, body, limits, watchdog, phase, bound)
    try:
        data = await conn.read_body()
    except BaseException:
        conn.close()
        raise
    finally:
        watchdog.disarm(watch)
    endpoint.pool.release(conn)
    if retryable_status(conn.status):
        raise UpstreamStatus(conn.status, data)
    return Answer(conn.status, content_type_of(conn), data)


@dataclass(slots=True)
class OpenStream:
    """A stream whose first bytes have arrived; nothing has been sent to the client yet.
    Its watch stays armed: the relay moves it along for the idle and total bounds."""

    conn: Connection
    first: bytes
    watch: Watch


async def open_stream(
    endpoint: Endpoint, head: bytes, body: bytes, limits: PhaseLimits, budget: float, watchdog: Watchdog
) -> OpenStream | Answer:
    """A streaming try up to its first bytes. A replica that answers with an error
    status instead of a stream gives an `Answer`, passed to the client as it is. One
    that answers 200 with another body (JSON, plain text) failed this try: nothing has
    been sent, and relaying it as a stream would glue an error event onto it."""
    bound = min(limits.response_header, budget)
    conn, watch = await _send(endpoint, head, body, limits, watchdog, HeaderTimeout, bound)
    loop = asyncio.get_running_loop()
    try:
        if conn.status != 200:
            watch.move(loop.time() + min(limits.idle, budget), IdleTimeout, min(limits.idle, budget))
            data = await conn.read_body()
            watchdog.disarm(watch)
            endpoint.pool.release(conn)
            if retryable_status(conn.status):
                raise UpstreamStatus(conn.status, data)
            return Answer(conn.status, content_type_of(conn), data)
        if not is_event_stream(conn):
            raise NotAStream(f"the replica answered a streaming request with {content_type_of(conn)!r}")
        bound = min(limits.first_token, budget)
        watch.move(loop.time() + bound, FirstTokenTimeout, bound)
        first = await conn.read_available()
        if first is None:
            raise UpstreamClosed("the replica ended the stream before sending anything")
        return OpenStream(conn, first, watch)
    except BaseException:
        watchdog.disarm(watch)
        conn.close()
        raise
