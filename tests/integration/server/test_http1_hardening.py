"""llmgw's HTTP/1.1 server against hostile and faulty clients, over real loopback
sockets: bad chunked framing, a missing Host, an encoded slash, bodies that arrive too
slowly, and bodies past the listener's memory budget."""

from __future__ import annotations

import asyncio
import logging

import orjson
import pytest
from test_http1 import (
    WAIT_S,
    _gateway,
    closed_by_server,
    connect,
    echo,
    read_response,
    run,
    serving,
)

from llmgw.http.body_guard import BodyRules
from llmgw.http.http1 import Limits
from llmgw.http.rsgi import HTTPProtocol, Scope


async def whole_body(scope: Scope, proto: HTTPProtocol) -> None:
    """Answers with the size of the body, read at once (as the gateway reads one)."""
    body = await proto()
    proto.response_bytes(200, [("content-type", "application/json")], orjson.dumps({"size": len(body)}))


def _no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    assert not [r for r in caplog.records if r.exc_info is not None or r.levelno >= logging.ERROR]


def test_a_malformed_chunk_is_answered_400_and_closed(caplog: pytest.LogCaptureFixture) -> None:
    async def test() -> None:
        for app in (echo, whole_body):
            async with serving(app) as server:
                for bad in (b"zz\r\nabc\r\n", b"3\r\nabcXX\r\n", b"fffffffffffffffffff\r\n"):
                    reader, writer = await connect(server)
                    writer.write(b"POST /up HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n" + bad)
                    status, headers, body = await read_response(reader)
                    assert (status, headers["connection"]) == (400, "close")
                    assert orjson.loads(body)["error"]["code"] == "bad_http"
                    assert await closed_by_server(reader)
                    writer.close()
                    await writer.wait_closed()

    run(test)
    _no_traceback(caplog)


def test_framing_that_smuggles_is_refused() -> None:
    async def test() -> None:
        async with serving(echo) as server:
            for request in (
                b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"0\r\n\r\n",
                b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
                b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n\r\nabc",
            ):
                reader, writer = await connect(server)
                writer.write(request)
                assert (await read_response(reader))[0] == 400
                assert await closed_by_server(reader)
                writer.close()
                await writer.wait_closed()

    run(test)


def test_http11_without_host_is_refused_and_http10_is_served() -> None:
    async def test() -> None:
        async with serving(echo) as server:
            reader, writer = await connect(server)
            writer.write(b"GET /x HTTP/1.1\r\n\r\n")
            status, _, body = await read_response(reader)
            assert status == 400
            assert "Host" in orjson.loads(body)["error"]["message"]
            assert await closed_by_server(reader)
            writer.close()
            reader, writer = await connect(server)
            writer.write(b"GET /x HTTP/1.0\r\n\r\n")
            assert (await read_response(reader))[0] == 200
            writer.close()
            await writer.wait_closed()

    run(test)


def test_a_bad_request_behind_a_good_one_is_refused_in_its_turn() -> None:
    async def test() -> None:
        async with serving(echo) as server:
            reader, writer = await connect(server)
            writer.write(
                b"POST /one HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc"
                b"GET /two HTTP/1.1\r\nHost: t\r\n\r\n"
                b"GET /three HTTP/1.1\r\n\r\n"
            )
            first, second, third = [await read_response(reader) for _ in range(3)]
            assert [orjson.loads(first[2])["path"], orjson.loads(second[2])["path"]] == ["/one", "/two"]
            assert third[0] == 400
            assert await closed_by_server(reader)
            writer.close()
            await writer.wait_closed()

    run(test)


def test_an_encoded_slash_is_not_decoded_for_routing() -> None:
    async def test() -> None:
        async with serving(echo) as server:
            reader, writer = await connect(server)
            writer.write(b"GET /a%2Fb/c%2fd%20e HTTP/1.1\r\nHost: t\r\n\r\n")
            assert orjson.loads((await read_response(reader))[2])["path"] == "/a%2Fb/c%2Fd e"
            writer.close()
            await writer.wait_closed()
        gateway = _gateway(1000)
        try:
            async with serving(gateway.app) as server:
                reader, writer = await connect(server)
                body = b'{"model":"m","messages":[{"role":"user","content":"hi"}]}'
                writer.write(
                    b"POST /v1/chat%%2Fcompletions HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n%b"
                    % (len(body), body)
                )
                status, _, answer = await read_response(reader)
                assert (status, orjson.loads(answer)["error"]["code"]) == (404, "unknown_route")
                writer.write(b"GET /v1/models/m HTTP/1.1\r\nHost: t\r\n\r\n")
                assert (await read_response(reader))[0] == 200
                writer.close()
                await writer.wait_closed()
        finally:
            gateway.close()

    run(test)


def test_a_body_that_does_not_arrive_is_answered_408(caplog: pytest.LogCaptureFixture) -> None:
    async def test() -> None:
        limits = Limits(body=BodyRules(timeout_s=0.5, min_rate=0))
        for app in (echo, whole_body):
            async with serving(app, limits=limits) as server:
                for head in (
                    b"POST /up HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc",
                    b"POST /up HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n",
                ):
                    reader, writer = await connect(server)
                    writer.write(head)
                    status, headers, body = await read_response(reader)
                    assert (status, headers["connection"]) == (408, "close")
                    assert len(headers["x-request-id"]) == 16  # minted by the server
                    assert orjson.loads(body)["error"]["code"] == "body_timeout"
                    assert await closed_by_server(reader)
                    writer.close()
                    await writer.wait_closed()
                assert server.budget.used_bytes == 0

    run(test)
    _no_traceback(caplog)


def test_bodies_past_the_memory_budget_are_refused_503_and_the_budget_comes_back() -> None:
    async def test() -> None:
        limits = Limits(body=BodyRules(memory_bytes=300_000, max_body_bytes=250_000))
        async with serving(whole_body, limits=limits) as server:
            holder_reader, holder = await connect(server)
            holder.write(b"POST /big HTTP/1.1\r\nHost: t\r\nContent-Length: 200000\r\n\r\n" + b"a" * 1000)
            await holder.drain()
            for _ in range(int(WAIT_S * 100)):  # the holder's head is read and reserved
                if server.budget.used_bytes:
                    break
                await asyncio.sleep(0.01)
            assert server.budget.used_bytes == 200_000
            for request in (
                b"POST /more HTTP/1.1\r\nHost: t\r\nContent-Length: 150000\r\n\r\n",
                b"POST /more HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                + b"%x\r\n%b\r\n" % (150_000, b"c" * 150_000),
            ):
                reader, writer = await connect(server)
                writer.write(request)
                status, headers, body = await read_response(reader)
                assert (status, headers["retry-after"]) == (503, "1")
                assert len(headers["x-request-id"]) == 16
                assert orjson.loads(body)["error"]["code"] == "body_memory_full"
                writer.close()
                await writer.wait_closed()
            # A small body is taken even now.
            reader, writer = await connect(server)
            writer.write(b"POST /small HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n" + b"s" * 1000)
            assert (await read_response(reader))[0] == 200
            writer.close()
            await writer.wait_closed()
            holder.write(b"a" * 199_000)
            status, _, body = await read_response(holder_reader)
            assert (status, orjson.loads(body)["size"]) == (200, 200_000)
            assert server.budget.used_bytes == 0
            reader, writer = await connect(server)
            writer.write(b"POST /more HTTP/1.1\r\nHost: t\r\nContent-Length: 150000\r\n\r\n" + b"b" * 150_000)
            assert (await read_response(reader))[0] == 200
            for w in (writer, holder):
                w.close()
                await w.wait_closed()

    run(test)


def test_a_client_leaving_mid_body_gives_its_reservation_back() -> None:
    async def test() -> None:
        async with serving(whole_body) as server:
            _reader, writer = await connect(server)
            writer.write(b"POST /big HTTP/1.1\r\nHost: t\r\nContent-Length: 50000\r\n\r\nabc")
            await writer.drain()
            for _ in range(int(WAIT_S * 100)):
                if server.budget.used_bytes:
                    break
                await asyncio.sleep(0.01)
            assert server.budget.used_bytes == 50_000
            writer.close()
            await writer.wait_closed()
            for _ in range(int(WAIT_S * 100)):
                if not server.budget.used_bytes:
                    break
                await asyncio.sleep(0.01)
            assert server.budget.used_bytes == 0

    run(test)
