"""The upstream client's parts over a fake transport (no process, no socket): the
connection's parsing and back-pressure, the pool's reuse, the watchdog's sweep."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from llmgw.errors import HeaderTimeout, IdleTimeout, UpstreamClosed, UpstreamProtocol
from llmgw.upstream import Connection
from llmgw.upstream.watchdog import Watch, Watchdog
from support.fake_upstream import END, FakePool, FakeReplica, FakeTransport, chunk, head, json_answer, settle

REQUEST = b"POST /v1/chat/completions HTTP/1.1\r\nHost: r\r\nContent-Length: 2\r\n\r\n"


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), timeout=10))


def connected(*script: bytes) -> tuple[Connection, FakeTransport]:
    replica = FakeReplica(list(script))
    conn = Connection()
    transport = FakeTransport(conn, replica)
    conn.connection_made(transport)
    return conn, transport


def test_a_sized_answer_is_read_whole_and_leaves_the_connection_reusable() -> None:
    async def go() -> None:
        conn, _ = connected(json_answer(200, {"ok": True}))
        assert await conn.exchange(REQUEST, b"{}") == 200
        assert await conn.read_body() == b'{"ok":true}'
        assert conn.complete
        assert conn.reusable
        assert not conn.closed

    run(go)


def test_a_chunked_answer_arrives_piece_by_piece_and_bursts_are_joined() -> None:
    async def go() -> None:
        conn, transport = connected(head())
        await conn.exchange(REQUEST, b"{}")
        transport.push(chunk(b"one"))
        assert await conn.read_chunk() == b"one"
        transport.push(chunk(b"two") + chunk(b"three"))
        await settle()
        assert await conn.read_available() == b"twothree"
        transport.push(END)
        assert await conn.read_available() is None
        assert conn.reusable

    run(go)


def test_an_answer_that_is_not_http_fails_the_exchange() -> None:
    async def go() -> None:
        conn, _transport = connected(b"SSH-2.0-OpenSSH\r\n\r\n")
        with pytest.raises(UpstreamProtocol):
            await conn.exchange(REQUEST, b"{}")
        assert conn.closed
        assert not conn.reusable

    run(go)


def test_a_connection_lost_mid_body_fails_the_read() -> None:
    async def go() -> None:
        conn, transport = connected(head(), chunk(b"part"))
        await conn.exchange(REQUEST, b"{}")
        assert await conn.read_chunk() == b"part"
        transport.cut()
        with pytest.raises(UpstreamClosed):
            await conn.read_chunk()
        assert not conn.reusable

    run(go)


def test_a_reader_that_falls_behind_pauses_the_socket_until_it_catches_up() -> None:
    async def go() -> None:
        conn, transport = connected(head())
        await conn.exchange(REQUEST, b"{}")
        piece = b"x" * 65536
        for _ in range(5):
            transport.push(chunk(piece))
        await settle()
        assert transport.paused
        while transport.paused:
            assert await conn.read_chunk() == piece
        assert not transport.paused

    run(go)


def test_expiry_fails_the_wait_with_the_first_error_and_closes() -> None:
    async def go() -> None:
        conn, transport = connected()
        exchange = asyncio.ensure_future(conn.exchange(REQUEST, b"{}"))
        await settle()
        conn.expire(HeaderTimeout(5.0))
        with pytest.raises(HeaderTimeout):
            await exchange
        await settle()
        # The close that follows the timeout is not reported in its place.
        assert transport.closed
        assert conn.closed
        with pytest.raises(HeaderTimeout):
            await conn.read_chunk()

    run(go)


def test_the_pool_reuses_only_a_whole_reusable_connection() -> None:
    async def go() -> None:
        replica = FakeReplica([json_answer(200, {})])
        pool = FakePool(replica)
        conn, reused = await pool.acquire(1.0)
        assert not reused
        await conn.exchange(REQUEST, b"{}")
        await conn.read_body()
        pool.release(conn)
        again, reused = await pool.acquire(1.0)
        assert again is conn
        assert reused
        # Released before its answer was whole: closed, not kept.
        replica.script = [head(), chunk(b"part")]
        await again.exchange(REQUEST, b"{}")
        pool.release(again)
        assert again.closed
        fresh, reused = await pool.acquire(1.0)
        assert fresh is not conn
        assert not reused
        assert pool.dials == 2

    run(go)


def test_the_pool_skips_idle_connections_found_closed_and_bounds_its_idle_set() -> None:
    async def go() -> None:
        pool = FakePool(FakeReplica([json_answer(200, {})]))
        pool._max_idle = 1
        conns = [(await pool.acquire(1.0))[0] for _ in range(2)]
        for conn in conns:
            await conn.exchange(REQUEST, b"{}")
            await conn.read_body()
            pool.release(conn)
        assert conns[1].closed  # over max_idle
        conns[0].connection_lost(None)
        conn, reused = await pool.acquire(1.0)
        assert not reused
        assert conn not in conns

    run(go)


def test_the_watchdog_expires_only_what_is_due_and_forgets_what_is_disarmed() -> None:
    async def go() -> None:
        dog = Watchdog()
        early, _ = connected()
        late, _ = connected()
        gone, _ = connected()
        dog.arm(early, 10.0, HeaderTimeout, 5.0)
        moved = dog.arm(late, 10.0, HeaderTimeout, 5.0)
        moved.move(20.0, IdleTimeout, 3.0)
        dog.disarm(dog.arm(gone, 1.0, HeaderTimeout, 5.0))
        assert dog.sweep(9.9) == 0
        assert dog.sweep(10.0) == 1
        assert early.closed
        assert not late.closed
        assert dog.sweep(20.0) == 1
        assert late.closed
        assert not gone.closed
        assert len(dog) == 0
        assert dog.expired == 2
        with pytest.raises(IdleTimeout):
            await late.read_chunk()

    run(go)


def test_a_renew_check_moves_a_deadline_on_instead_of_expiring_it() -> None:
    async def go() -> None:
        dog = Watchdog()
        conn, _ = connected()
        watch = dog.arm(conn, 10.0, HeaderTimeout, 5.0)
        asked: list[float] = []

        def renew(w: Watch, now: float) -> bool:
            asked.append(now)
            if now >= w.until:
                return False
            w.deadline = now + 5.0
            return True

        watch.renew, watch.until = renew, 20.0
        assert dog.sweep(10.0) == 0
        assert watch.deadline == 15.0
        assert dog.sweep(15.0) == 0
        assert dog.sweep(20.0) == 1
        assert conn.closed
        assert asked == [10.0, 15.0, 20.0]

    run(go)
