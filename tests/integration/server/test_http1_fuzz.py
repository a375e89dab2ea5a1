"""Fuzzing llmgw's HTTP/1.1 server (httptools under llmgw.http.http1) over raw
loopback sockets, with what an HTTP client would refuse to send: pipelined requests,
Content-Length beside Transfer-Encoding, bad chunk sizes, 100-continue, oversized and
broken headers, bytes flipped anywhere, all written in arbitrary pieces.

Whatever arrives, what comes back must be a run of well-formed responses (an interim
100 Continue allowed), never a 500; a refusal (4xx) closes the connection right after
it; and the server logs no error or traceback. The server runs on its own loop in a
thread for the whole test, with short keep-alive and body deadlines so that every
connection ends by the server's own hand."""

from __future__ import annotations

import asyncio
import itertools
import logging
import socket
import threading
from collections.abc import Iterator

import pytest
import uvloop
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_http1 import echo

from llmgw.http.body_guard import BodyRules
from llmgw.http.http1 import Limits
from llmgw.http.http1_server import Http1Server

WAIT_S = 10.0  # a bound on every socket wait, never a figure a test checks
LIMITS = Limits(
    max_request_target=256,
    max_header_bytes=1024,
    max_headers=20,
    keepalive_s=0.3,
    body=BodyRules(timeout_s=0.3, min_rate=0, memory_bytes=1 << 20, max_body_bytes=1 << 16),
)


class _Errors(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR or record.exc_info is not None:
            self.records.append(record)


class _Running:
    def __init__(self, port: int, errors: _Errors) -> None:
        self.port = port
        self.errors = errors


@pytest.fixture(scope="module")
def server() -> Iterator[_Running]:
    errors = _Errors()
    logging.getLogger("llmgw").addHandler(errors)
    loop = uvloop.new_event_loop()
    http = Http1Server(echo, "127.0.0.1", 0, limits=LIMITS, sweep_s=0.05)
    loop.run_until_complete(http.start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield _Running(http.port, errors)
    finally:
        asyncio.run_coroutine_threadsafe(http.stop(grace_s=1.0), loop).result(WAIT_S)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(WAIT_S)
        loop.close()
        logging.getLogger("llmgw").removeHandler(errors)


# --- what is sent ------------------------------------------------------------------------

_methods = st.sampled_from([b"GET", b"POST", b"PUT", b"DELETE", b"OPTIONS", b"G=T", b""])
_targets = st.sampled_from(
    [b"/", b"/v1/chat%2Fcompletions", b"/a?b=%zz", b"*", b"/" + b"a" * 300, b"/%00", b"/ /", b"http://h/x"]
)
_versions = st.sampled_from([b"HTTP/1.1", b"HTTP/1.0", b"HTTP/2.0", b"HTTP/1.1x", b"HTTP/9.9", b""])
_header = st.sampled_from(
    [
        b"Host: t",
        b"Content-Length: 3",
        b"Content-Length: 0",
        b"Content-Length: -1",
        b"Content-Length: 99999999999999999999",
        b"Content-Length: 3, 3",
        b"Transfer-Encoding: chunked",
        b"Transfer-Encoding: gzip",
        b"Transfer-Encoding: chunked, chunked",
        b"Transfer-Encoding : chunked",
        b"Expect: 100-continue",
        b"Expect: 200-ok",
        b"Connection: close",
        b"Connection: keep-alive",
        b"Connection: upgrade\r\nUpgrade: h2c",
        b"x-big: " + b"b" * 1200,
        b" folded: value",
        b"no-colon",
        b"x-nul: a\x00b",
        b"x-session-id: " + b"s" * 200,
    ]
)
_chunk = st.one_of(
    st.binary(max_size=20).map(lambda data: b"%x\r\n%b\r\n" % (len(data), data)),
    st.sampled_from(
        [
            b"zz\r\nabc\r\n",
            b"3\r\nabcXX\r\n",
            b"ffffffffffffffffffff\r\n",
            b"-1\r\n",
            b"3;ext=1\r\nabc\r\n",
            b"0\r\nx-trailer: t\r\n\r\n",
            b"0\r\n\r\n",
            b"3\nabc\n",
        ]
    ),
)


@st.composite
def _request(draw: st.DrawFn) -> bytes:
    line = draw(_methods) + b" " + draw(_targets) + b" " + draw(_versions)
    headers = draw(st.lists(_header, max_size=6))
    body = draw(st.one_of(st.binary(max_size=8), st.lists(_chunk, max_size=4).map(b"".join)))
    return line + b"\r\n" + b"".join(h + b"\r\n" for h in headers) + b"\r\n" + body


@st.composite
def _mutated(draw: st.DrawFn) -> bytes:
    data = bytearray(b"".join(draw(st.lists(_request(), min_size=1, max_size=3))))
    for _ in range(draw(st.integers(0, 3))):
        if data:
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    return bytes(data)


@st.composite
def _pieces(draw: st.DrawFn) -> list[bytes]:
    data = draw(_mutated())
    cuts = sorted(set(draw(st.lists(st.integers(0, len(data)), max_size=4))))
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds) if b > a]


# --- what comes back ---------------------------------------------------------------------


def _exchange(port: int, pieces: list[bytes]) -> bytes:
    """Sends `pieces` and reads until the server closes (it always does: its keep-alive
    and body deadlines are short)."""
    received = bytearray()
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT_S) as sock:
        try:
            for piece in pieces:
                sock.sendall(piece)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server refused and closed before all was sent
        while True:
            try:
                data = sock.recv(65536)
            except ConnectionResetError:
                break
            if not data:
                break
            received += data
    return bytes(received)


def _responses(stream: bytes) -> list[tuple[int, dict[str, str]]]:
    """The responses in `stream`, each checked to be well-formed (no HEAD is sent, so
    every final response carries the body its framing says)."""
    out: list[tuple[int, dict[str, str]]] = []
    rest = stream
    while rest:
        head, sep, rest = rest.partition(b"\r\n\r\n")
        assert sep, f"a response head that does not end: {head[:200]!r}"
        lines = head.decode("latin-1").split("\r\n")
        version, status_text, _ = (lines[0] + " ").split(" ", 2)
        assert version == "HTTP/1.1", lines[0]
        assert status_text.isdigit(), lines[0]
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            assert colon, line
            assert name == name.strip(), line
            headers[name.lower()] = value.strip()
        status = int(status_text)
        if status != 100:
            if "content-length" in headers:
                size = int(headers["content-length"])
                assert len(rest) >= size, "a body shorter than its content-length"
                rest = rest[size:]
            else:
                assert headers.get("transfer-encoding") == "chunked", headers
                while True:
                    size_line, crlf, rest = rest.partition(b"\r\n")
                    assert crlf, "a chunked body cut short"
                    size = int(size_line, 16)
                    assert rest[size : size + 2] == b"\r\n"
                    rest = rest[size + 2 :]
                    if size == 0:
                        break
        out.append((status, headers))
    return out


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(pieces=_pieces())
def test_whatever_is_sent_the_answer_is_well_formed(server: _Running, pieces: list[bytes]) -> None:
    responses = _responses(_exchange(server.port, pieces))
    statuses = [status for status, _ in responses]
    assert all(status < 500 for status in statuses), statuses
    for status, headers in responses[:-1]:
        assert status < 400 or status == 404, f"a refusal {status} followed by more responses"
        assert status == 100 or headers.get("connection") != "close"
    if responses and responses[-1][0] >= 400 and responses[-1][0] != 404:
        assert responses[-1][1].get("connection") == "close"
    assert not server.errors.records, [r.getMessage() for r in server.errors.records]
