"""A streamed response's head and the body bytes already at hand leave in one write,
framed as the client's protocol wants (chunked, raw for HTTP/1.0, nothing for HEAD)."""

from __future__ import annotations

import asyncio

import pytest

from llmgw.http.http1_exchange import DateHeader, Exchange


class Wire:
    """A connection that keeps what is written, one entry per write."""

    def __init__(self) -> None:
        self.closed = False
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    async def drain(self) -> None:
        return None

    async def lost(self) -> None:
        await asyncio.Event().wait()

    def body_read(self) -> None:
        return None


def exchange(wire: Wire, *, head_only: bool = False, http10: bool = False) -> Exchange:
    return Exchange(wire, DateHeader(lambda: 0.0), keep_alive=True, head_only=head_only, http10=http10)


@pytest.mark.parametrize(
    ("http10", "head_only", "body"),
    [(False, False, b"5\r\ndata:\r\n"), (True, False, b"data:"), (False, True, b"")],
    ids=["chunked", "http/1.0", "HEAD"],
)
def test_the_head_and_the_first_bytes_are_one_write(http10: bool, head_only: bool, body: bytes) -> None:
    wire = Wire()
    stream = exchange(wire, http10=http10, head_only=head_only).response_stream(200, [], b"data:")
    [written] = wire.writes
    head, _, rest = written.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    assert rest == body
    asyncio.run(stream.send_bytes(b"more"))
    assert wire.writes[1:] == ([] if head_only else [b"more" if http10 else b"4\r\nmore\r\n"])


def test_without_first_bytes_the_head_goes_alone() -> None:
    wire = Wire()
    exchange(wire).response_stream(200, [("content-type", "text/event-stream")])
    [written] = wire.writes
    assert written.endswith(b"\r\n\r\n")
    assert b"transfer-encoding: chunked" in written
