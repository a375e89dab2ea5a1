"""Dispatch and forward over a fake transport: every phase a try can fail in, what the
client is told, and what becomes of the replica's connection (back to the pool only
after a whole answer, closed after anything else, never left with an armed deadline).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from llmgw.errors import ApiError
from llmgw.router.forward import PhaseLimits
from support.fake_upstream import (
    END,
    LIMITS,
    FakeClient,
    Rig,
    event,
    head,
    json_answer,
    settle,
)

OK = json_answer(200, {"id": "c1", "choices": [{"message": {"content": "hello"}}]})
STREAM = [head(), event('{"choices":[{"delta":{"content":"he"}}]}'), event("[DONE]"), END]


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), timeout=10))


async def refused(task: asyncio.Task[None]) -> ApiError:
    with pytest.raises(ApiError) as caught:
        await task
    return caught.value


def test_a_whole_answer_is_relayed_and_its_connection_reused() -> None:
    async def go() -> None:
        rig = Rig([OK], retries=0)
        for _ in range(2):
            client = FakeClient()
            await rig.serve(client, stream=False)
            assert client.status == 200
            assert b"hello" in client.body
        assert rig.pools["a"].dials == 1
        assert rig.replicas["a"].last.requests == 2
        assert len(rig.watchdog) == 0

    run(go)


def test_a_whole_stream_is_relayed_and_its_connection_reused() -> None:
    async def go() -> None:
        rig = Rig(STREAM, retries=0)
        for _ in range(2):
            client = FakeClient()
            await rig.serve(client, stream=True)
            assert client.status == 200
            assert client.body.endswith(b"data: [DONE]\n\n")
        assert rig.pools["a"].dials == 1
        assert len(rig.watchdog) == 0

    run(go)


def test_a_dial_failure_fails_the_try_and_is_told_as_unavailable() -> None:
    async def go() -> None:
        rig = Rig([OK], retries=0)
        rig.replicas["a"].refuse = True
        error = await refused(rig.serve(FakeClient(), stream=False))
        assert error.code == "upstream_unavailable"
        assert "no replica accepted a connection" in error.message
        assert rig.metrics.upstream_failures
        assert len(rig.watchdog) == 0

    run(go)


def test_no_head_within_response_header_is_a_504_naming_it() -> None:
    async def go() -> None:
        rig = Rig([], retries=0)
        task = rig.serve(FakeClient(), stream=True)
        await settle()
        assert rig.expire(LIMITS.response_header_s - 1) == 0
        assert rig.expire(LIMITS.response_header_s + 1) == 1
        error = await refused(task)
        assert error.status == 504
        assert "response_header" in error.message
        assert rig.replicas["a"].last.closed
        assert len(rig.watchdog) == 0

    run(go)


def test_an_error_status_is_retried_elsewhere_and_its_whole_answer_reuses_the_connection() -> None:
    async def go() -> None:
        busy = json_answer(503, {"error": {"message": "busy"}})
        rig = Rig([busy], [busy], retries=1)
        error = await refused(rig.serve(FakeClient(), stream=True))
        assert error.code == "no_capacity"
        assert [r.requests for r in rig.replicas.values()] == [1, 1]
        # The 503 was read whole: the connection went back to its pool, not closed.
        assert not any(r.last.closed for r in rig.replicas.values())
        assert rig.metrics.retries

    run(go)


def test_a_client_error_status_is_passed_through() -> None:
    async def go() -> None:
        rig = Rig([json_answer(400, {"error": {"message": "bad"}})], retries=1)
        client = FakeClient()
        await rig.serve(client, stream=True)
        assert client.status == 400
        assert b"bad" in client.body

    run(go)


def test_a_non_stream_body_to_a_stream_request_fails_the_try() -> None:
    async def go() -> None:
        rig = Rig([OK], retries=0)
        error = await refused(rig.serve(FakeClient(), stream=True))
        assert error.code == "upstream_not_a_stream"
        assert rig.replicas["a"].last.closed
        assert len(rig.watchdog) == 0

    run(go)


def test_no_first_token_in_time_is_a_504_naming_first_token() -> None:
    async def go() -> None:
        rig = Rig([head()], retries=0)
        task = rig.serve(FakeClient(), stream=True)
        await settle()
        assert rig.expire(LIMITS.first_token_s + 1) == 1
        error = await refused(task)
        assert error.status == 504
        assert "first_token" in error.message
        assert rig.replicas["a"].last.closed

    run(go)


def test_an_idle_replica_mid_stream_ends_the_stream_with_an_error_event() -> None:
    async def go() -> None:
        rig = Rig(STREAM[:2], retries=0)
        client = FakeClient()
        task = rig.serve(client, stream=True)
        await settle()
        assert client.status == 200
        assert rig.expire(LIMITS.idle_s - 1) == 0
        assert rig.expire(LIMITS.idle_s + 1) == 1
        await task
        assert b"idle" in client.body.rsplit(b"data: ", 1)[-1]
        assert rig.replicas["a"].last.closed
        assert rig.metrics.stream_interruptions
        assert len(rig.watchdog) == 0

    run(go)


def test_total_bounds_a_stream_when_it_is_nearer_than_idle() -> None:
    async def go() -> None:
        limits = PhaseLimits(
            dial_s=1.0,
            response_header_s=5.0,
            generation_s=0,
            first_token_s=10.0,
            idle_s=30.0,
            total_s=20.0,
            replica_fresh_s=10.0,
        )
        rig = Rig(STREAM[:2], limits=limits, retries=0)
        client = FakeClient()
        task = rig.serve(client, stream=True)
        await settle()
        assert rig.expire(21) == 1
        await task
        assert b"total" in client.body.rsplit(b"data: ", 1)[-1]

    run(go)


def test_a_cut_stream_ends_with_an_error_event_and_closes() -> None:
    async def go() -> None:
        rig = Rig(STREAM[:2], retries=0)
        client = FakeClient()
        task = rig.serve(client, stream=True)
        await settle()
        rig.replicas["a"].last.cut()
        await task
        assert b'"error"' in client.body
        assert len(rig.watchdog) == 0

    run(go)


def test_a_stream_without_done_is_cut_and_not_reused() -> None:
    async def go() -> None:
        rig = Rig([*STREAM[:2], END], retries=0)
        client = FakeClient()
        await rig.serve(client, stream=True)
        assert b"[DONE]" in client.body
        assert b'"error"' in client.body
        # The message was whole for HTTP but not for the stream: closed, not pooled.
        assert rig.replicas["a"].last.closed

    run(go)


def test_a_client_that_leaves_closes_the_replicas_connection() -> None:
    async def go() -> None:
        rig = Rig(STREAM[:2], retries=0)
        client = FakeClient()
        task = rig.serve(client, stream=True)
        await settle()
        client.gone = True
        rig.replicas["a"].last.push(event('{"choices":[{"delta":{"content":"llo"}}]}'))
        await task
        assert rig.replicas["a"].last.closed
        assert len(rig.watchdog) == 0

    run(go)


def test_a_cancelled_request_closes_the_replicas_connection() -> None:
    async def go() -> None:
        rig = Rig(STREAM[:2], retries=0)
        task = rig.serve(FakeClient(), stream=True)
        await settle()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await settle()
        assert rig.replicas["a"].last.closed
        assert rig.endpoint("a").inflight == 0
        assert len(rig.watchdog) == 0

    run(go)


def test_a_failed_answer_is_not_reused() -> None:
    async def go() -> None:
        rig = Rig([], retries=0)
        task = rig.serve(FakeClient(), stream=False)
        await settle()
        rig.replicas["a"].last.cut()
        await refused(task)
        rig.replicas["a"].script = [OK]
        client = FakeClient()
        await rig.serve(client, stream=False)
        assert client.status == 200
        assert rig.pools["a"].dials == 2

    run(go)


def test_a_kept_alive_connection_the_replica_closed_is_replaced_silently() -> None:
    async def go() -> None:
        rig = Rig([OK], retries=0)
        await rig.serve(FakeClient(), stream=False)
        # The replica closes the idle connection, and the pool has not noticed yet.
        rig.replicas["a"].last.closed = True
        client = FakeClient()
        await rig.serve(client, stream=False)
        assert client.status == 200
        assert rig.pools["a"].dials == 2
        assert rig.breaker("a")._failures == 0

    run(go)
