"""llmgw's HTTP/1.1 server over real loopback sockets: framing, keep-alive, pipelining,
streaming, disconnects, refusals, the connection cap and the graceful stop."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import orjson
import uvloop

from llmgw.config import settings_from_mapping
from llmgw.core.request_context import REQUEST_ID
from llmgw.http.http1 import Limits
from llmgw.http.http1_server import Http1Server
from llmgw.http.rsgi import HTTPProtocol, ProtocolClosed, Scope
from llmgw.server.gateway import Gateway

App = Callable[[Any, Any], Awaitable[None]]
WAIT_S = 10.0  # a bound on every wait, never a figure a test checks


@contextlib.asynccontextmanager
async def serving(app: App, **options: Any) -> AsyncIterator[Http1Server]:
    server = Http1Server(app, "127.0.0.1", 0, **options)
    await server.start()
    try:
        yield server
    finally:
        await server.stop(grace_s=WAIT_S)


def run(test: Callable[[], Awaitable[None]]) -> None:
    uvloop.run(asyncio.wait_for(test(), 4 * WAIT_S))


async def echo(scope: Scope, proto: HTTPProtocol) -> None:
    """Answers with what it was asked: method, path, query, one header, the body."""
    parts = [part async for part in proto]
    body = orjson.dumps(
        {
            "method": scope.method,
            "path": scope.path,
            "query": scope.query_string,
            "x-test": scope.headers.get("X-Test"),
            "body": b"".join(parts).decode(),
            "parts": len(parts),
        }
    )
    proto.response_bytes(200, [("content-type", "application/json")], body)


async def read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    """One response read off a raw connection (content-length or chunked framing)."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), WAIT_S)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    if "content-length" in headers:
        body = await asyncio.wait_for(reader.readexactly(int(headers["content-length"])), WAIT_S)
    else:
        parts = []
        while True:
            size = int((await asyncio.wait_for(reader.readline(), WAIT_S)).strip(), 16)
            chunk = await asyncio.wait_for(reader.readexactly(size + 2), WAIT_S)
            if size == 0:
                break
            parts.append(chunk[:-2])
        body = b"".join(parts)
    return status, headers, body


async def connect(server: Http1Server) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", server.port)


async def closed_by_server(reader: asyncio.StreamReader) -> bool:
    return await asyncio.wait_for(reader.read(), WAIT_S) == b""


def test_keep_alive_serves_several_requests_on_one_connection() -> None:
    async def test() -> None:
        async with serving(echo) as server:
            reader, writer = await connect(server)
            for i in range(3):
                writer.write(b"GET /a%%20b/%d?x=%%20y HTTP/1.1\r\nHost: t\r\nx-test: v%d\r\n\r\n" % (i, i))
                status, headers, body = await read_response(reader)
                answer = orjson.loads(body)
                assert status == 200
                assert "connection" not in headers
                assert "date" in headers
                assert (answer["path"], answer["query"], answer["x-test"]) == (f"/a b/{i}", "x=%20y", f"v{i}")
            assert server.connections == 1
            writer.close()
            await writer.wait_closed()

    run(test)


def test_chunked_request_body_arrives_in_parts() -> None:
    async def test() -> None:
        async with serving(echo) as server:
            reader, writer = await connect(server)
            writer.write(b"POST /up HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
            await writer.drain()
            writer.write(b"6\r\n world\r\n0\r\n\r\n")
            status, _, body = await read_response(reader)
            answer = orjson.loads(body)
            assert status == 200
            assert answer["body"] == "hello world"
            writer.close()
            await writer.wait_closed()

    run(test)


def test_expect_100_continue_is_answered_when_the_body_is_read() -> None:
    async def test() -> None:
        async with serving(echo) as server:
            reader, writer = await connect(server)
            writer.write(b"POST /up HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n")
            interim = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), WAIT_S)
            assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
            writer.write(b"body")
            status, _, body = await read_response(reader)
            assert (status, orjson.loads(body)["body"]) == (200, "body")
            writer.close()
            await writer.wait_closed()

    run(test)


def test_pipelined_requests_are_answered_in_order() -> None:
    async def test() -> None:
        async with serving(echo) as server:
            reader, writer = await connect(server)
            writer.write(
                b"POST /one HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc"
                b"GET /two HTTP/1.1\r\nHost: t\r\n\r\n"
                b"POST /three HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nxy\r\n0\r\n\r\n"
            )
            answers = [orjson.loads((await read_response(reader))[2]) for _ in range(3)]
            assert [(a["path"], a["body"]) for a in answers] == [
                ("/one", "abc"),
                ("/two", ""),
                ("/three", "xy"),
            ]
            writer.close()
            await writer.wait_closed()

    run(test)


def test_connection_close_and_http10_close_after_the_answer() -> None:
    async def test() -> None:
        async with serving(echo) as server:
            for request in (
                b"GET /c HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
                b"GET /c HTTP/1.0\r\n\r\n",
            ):
                reader, writer = await connect(server)
                writer.write(request)
                status, headers, _ = await read_response(reader)
                assert status == 200
                assert headers["connection"] == "close"
                assert await closed_by_server(reader)
                writer.close()
                await writer.wait_closed()

    run(test)


def test_malformed_requests_are_refused_and_closed() -> None:
    async def test() -> None:
        limits = Limits(max_request_target=64, max_header_bytes=256)
        async with serving(echo, limits=limits) as server:
            for request, expected in (
                (b"NOT HTTP AT ALL\r\n\r\n", 400),
                (b"GET /" + b"a" * 100 + b" HTTP/1.1\r\nHost: t\r\n\r\n", 414),
                (b"GET / HTTP/1.1\r\nHost: t\r\nx-big: " + b"b" * 300 + b"\r\n\r\n", 431),
            ):
                reader, writer = await connect(server)
                writer.write(request)
                status, _, body = await read_response(reader)
                assert status == expected
                assert orjson.loads(body)["error"]["type"] == "invalid_request_error"
                assert await closed_by_server(reader)
                writer.close()
                await writer.wait_closed()

    run(test)


def test_a_head_that_never_ends_is_cut_off() -> None:
    async def test() -> None:
        async with serving(echo, limits=Limits(max_request_target=64, max_header_bytes=256)) as server:
            reader, writer = await connect(server)
            writer.write(b"GET / HTTP/1.1\r\nHost: t\r\nx-endless: " + b"e" * 400_000)
            answer = b""
            with contextlib.suppress(ConnectionResetError):
                # The refusal may be overtaken by the reset its unread bytes cause.
                answer = await asyncio.wait_for(reader.read(), WAIT_S)
            assert answer == b"" or answer.startswith(b"HTTP/1.1 431 ")
            writer.close()
            with contextlib.suppress(ConnectionResetError):
                await writer.wait_closed()

    run(test)


def test_an_application_failure_is_a_500_in_openai_shape() -> None:
    async def broken(scope: Scope, proto: HTTPProtocol) -> None:
        raise LookupError("a bug")

    async def silent(scope: Scope, proto: HTTPProtocol) -> None:
        return None

    async def broken_with_an_id(scope: Scope, proto: HTTPProtocol) -> None:
        REQUEST_ID.set("app-made-1")
        raise LookupError("a bug")

    async def test() -> None:
        for app in (broken, silent, broken_with_an_id):
            async with serving(app) as server:
                reader, writer = await connect(server)
                writer.write(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
                status, headers, body = await read_response(reader)
                assert status == 500
                assert orjson.loads(body)["error"]["type"] == "server_error"
                # The id the application gave the request, so the answer and the logged
                # traceback share it; one of the server's own without one.
                request_id = headers["x-request-id"]
                if app is broken_with_an_id:
                    assert request_id == "app-made-1"
                else:
                    assert len(request_id) == 16
                writer.close()
                await writer.wait_closed()

    run(test)


def test_streamed_response_arrives_chunk_by_chunk() -> None:
    sent_next = [asyncio.Event() for _ in range(3)]

    async def streaming(scope: Scope, proto: HTTPProtocol) -> None:
        transport = proto.response_stream(200, [("content-type", "text/event-stream")])
        for i, go in enumerate(sent_next):
            # Each piece is sent only once the client has read the one before.
            await transport.send_bytes(b"data: %d\n\n" % i)
            await go.wait()

    async def test() -> None:
        async with (
            serving(streaming) as server,
            httpx.AsyncClient(timeout=WAIT_S) as client,
            client.stream("GET", f"http://127.0.0.1:{server.port}/s") as response,
        ):
            assert response.headers["transfer-encoding"] == "chunked"
            received = []
            async for chunk in response.aiter_raw():
                received.append(chunk)
                sent_next[len(received) - 1].set()
            assert received == [b"data: 0\n\n", b"data: 1\n\n", b"data: 2\n\n"]

    run(test)


def test_a_client_leaving_mid_stream_is_noticed() -> None:
    noticed: list[str] = []

    async def streaming(scope: Scope, proto: HTTPProtocol) -> None:
        transport = proto.response_stream(200, [("content-type", "text/event-stream")])
        await transport.send_bytes(b"data: first\n\n")
        await proto.client_disconnect()
        noticed.append("disconnect")
        try:
            for _ in range(1000):
                await transport.send_bytes(b"data: more\n\n")
        except ProtocolClosed:
            noticed.append("closed")

    async def test() -> None:
        async with serving(streaming) as server:
            reader, writer = await connect(server)
            writer.write(b"GET /s HTTP/1.1\r\nHost: t\r\n\r\n")
            await asyncio.wait_for(reader.readuntil(b"data: first\n\n\r\n"), WAIT_S)
            writer.close()
            await writer.wait_closed()
            for _ in range(1000):
                if len(noticed) == 2:
                    break
                await asyncio.sleep(0.01)
            assert noticed == ["disconnect", "closed"]

    run(test)


def test_graceful_stop_lets_the_request_in_flight_finish() -> None:
    release = asyncio.Event()
    arrived = asyncio.Event()

    async def slow(scope: Scope, proto: HTTPProtocol) -> None:
        arrived.set()
        await release.wait()
        proto.response_bytes(200, [("content-type", "text/plain")], b"done")

    async def test() -> None:
        server = Http1Server(slow, "127.0.0.1", 0)
        await server.start()
        port = server.port
        idle_reader, idle_writer = await connect(server)
        reader, writer = await connect(server)
        writer.write(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        await asyncio.wait_for(arrived.wait(), WAIT_S)
        stopping = asyncio.ensure_future(server.stop(grace_s=WAIT_S))
        # The idle connection is closed at once; new ones are refused.
        assert await closed_by_server(idle_reader)
        refused = False
        try:
            _, late = await asyncio.open_connection("127.0.0.1", port)
            late.close()
        except ConnectionRefusedError:
            refused = True
        assert refused
        assert not stopping.done()
        release.set()
        status, headers, body = await read_response(reader)
        assert (status, body, headers["connection"]) == (200, b"done", "close")
        await asyncio.wait_for(stopping, WAIT_S)
        for w in (writer, idle_writer):
            w.close()
            await w.wait_closed()

    run(test)


def test_connections_over_the_cap_wait_to_be_accepted() -> None:
    async def test() -> None:
        async with serving(echo, max_connections=1) as server:
            first_reader, first_writer = await connect(server)
            first_writer.write(b"GET /first HTTP/1.1\r\nHost: t\r\n\r\n")
            assert (await read_response(first_reader))[0] == 200
            # The kernel completes the second handshake; the server does not accept it.
            second_reader, second_writer = await connect(server)
            second_writer.write(b"GET /second HTTP/1.1\r\nHost: t\r\n\r\n")
            first_writer.write(b"GET /again HTTP/1.1\r\nHost: t\r\n\r\n")
            assert (await read_response(first_reader))[0] == 200
            assert server.connections == 1
            first_writer.close()
            await first_writer.wait_closed()
            status, _, body = await read_response(second_reader)
            assert (status, orjson.loads(body)["path"]) == (200, "/second")
            second_writer.close()
            await second_writer.wait_closed()

    run(test)


def test_idle_keep_alive_connection_is_closed() -> None:
    async def test() -> None:
        async with serving(echo, limits=Limits(keepalive_s=0.05)) as server:
            reader, writer = await connect(server)
            writer.write(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
            assert (await read_response(reader))[0] == 200
            assert await closed_by_server(reader)
            writer.close()
            await writer.wait_closed()

    run(test)


def _gateway(max_body_bytes: int) -> Gateway:
    settings = settings_from_mapping(
        {
            "endpoints": [{"id": "r0", "url": "http://127.0.0.1:9", "models": ["m"]}],
            "router": {"max_body_bytes": max_body_bytes},
        },
        source="test",
        environ={},
    )
    return Gateway(settings)


def test_gateway_refuses_a_body_over_its_limit_and_keeps_the_connection() -> None:
    async def test() -> None:
        gateway = _gateway(1000)
        body = b'{"model":"m","messages":[{"role":"user","content":"' + b"x" * 5000 + b'"}]}'
        try:
            async with serving(gateway.app) as server:
                reader, writer = await connect(server)
                writer.write(
                    b"POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n%b"
                    % (len(body), body)
                )
                status, _, answer = await read_response(reader)
                assert (status, orjson.loads(answer)["error"]["code"]) == (413, "body_too_large")
                chunked = b"".join(b"%x\r\n%b\r\n" % (len(part), part) for part in (body[:600], body[600:]))
                writer.write(
                    b"POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                    + chunked
                    + b"0\r\n\r\n"
                )
                status, _, answer = await read_response(reader)
                assert (status, orjson.loads(answer)["error"]["code"]) == (413, "body_too_large")
                # The rest of each refused body was read and dropped: the connection goes on.
                writer.write(b"GET /v1/models HTTP/1.1\r\nHost: t\r\n\r\n")
                status, _, answer = await read_response(reader)
                assert status == 200
                assert [m["id"] for m in orjson.loads(answer)["data"]] == ["m"]
                writer.close()
                await writer.wait_closed()
        finally:
            gateway.close()

    run(test)
