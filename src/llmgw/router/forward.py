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
    UpstreamClosed,
    UpstreamStatus,
)
from llmgw.router.endpoints import Endpoint
from llmgw.upstream import Connection


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
    """Statuses another replica may answer differently: overload and server faults."""
    return status == 429 or status >= 500


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


async def _exchange(endpoint: Endpoint, head: bytes, body: bytes, limits: PhaseLimits) -> Connection:
    """Sends the request; a kept-alive connection the replica closed meanwhile is
    replaced once, silently: that is the pool's staleness, not the replica's failure."""
    conn, reused = await endpoint.pool.acquire(limits.dial)
    try:
        await conn.exchange(head, body)
    except UpstreamClosed:
        conn.close()
        if not reused:
            raise
        conn = await endpoint.pool.dial(limits.dial)
        await conn.exchange(head, body)
    return conn


@dataclass(slots=True)
class Answer:
    """A complete non-streaming answer (or a replica's own refusal, passed through)."""

    status: int
    content_type: str
    body: bytes


async def fetch(endpoint: Endpoint, head: bytes, body: bytes, limits: PhaseLimits, budget: float) -> Answer:
    """A non-streaming try: the whole answer within generation (or what is left of total)."""
    bound = min(limits.generation, budget) if limits.generation > 0 else budget
    conn: Connection | None = None
    try:
        async with asyncio.timeout(bound):
            conn = await _exchange(endpoint, head, body, limits)
            data = await conn.read_body()
    except TimeoutError as exc:
        if conn is not None:
            conn.close()
        raise GenerationTimeout(bound) from exc
    except BaseException:
        if conn is not None:
            conn.close()
        raise
    endpoint.pool.release(conn)
    if retryable_status(conn.status):
        raise UpstreamStatus(conn.status, data)
    return Answer(conn.status, content_type_of(conn), data)


@dataclass(slots=True)
class OpenStream:
    """A stream whose first bytes have arrived; nothing has been sent to the client yet."""

    conn: Connection
    first: bytes


async def open_stream(
    endpoint: Endpoint, head: bytes, body: bytes, limits: PhaseLimits, budget: float
) -> OpenStream | Answer:
    """A streaming try up to its first bytes. A replica that answers with an error
    status instead of a stream gives an `Answer`, passed to the client as it is."""
    conn: Connection | None = None
    try:
        bound = min(limits.response_header, budget)
        try:
            async with asyncio.timeout(bound):
                conn = await _exchange(endpoint, head, body, limits)
        except TimeoutError as exc:
            raise HeaderTimeout(bound) from exc
        if conn.status != 200:
            try:
                async with asyncio.timeout(min(limits.idle, budget)):
                    data = await conn.read_body()
            except TimeoutError as exc:
                raise HeaderTimeout(min(limits.idle, budget)) from exc
            endpoint.pool.release(conn)
            if retryable_status(conn.status):
                raise UpstreamStatus(conn.status, data)
            return Answer(conn.status, content_type_of(conn), data)
        bound = min(limits.first_token, budget)
        try:
            async with asyncio.timeout(bound):
                first = await conn.read_chunk()
        except TimeoutError as exc:
            raise FirstTokenTimeout(bound) from exc
        if first is None:
            raise UpstreamClosed("the replica ended the stream before sending anything")
        return OpenStream(conn, first)
    except BaseException:
        if conn is not None:
            conn.close()
        raise
