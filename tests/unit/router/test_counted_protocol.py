"""A mounted application's answers are counted under its mount's prefix, once each,
whether it answers at once or streams."""

from __future__ import annotations

import asyncio

from llmgw.router.counted import CountedProtocol
from llmgw.router.metrics import GatewayMetrics
from support.fake_upstream import FakeClient


def test_an_answer_at_once_is_counted_under_the_prefix() -> None:
    metrics = GatewayMetrics()
    client = FakeClient()
    counted = CountedProtocol(client, metrics, "/auth")
    counted.response_bytes(302, [("location", "/")], b"")
    assert client.status == 302
    assert counted.status == 302
    assert metrics.requests == {("/auth", "", 302): 1}


def test_a_stream_is_counted_once_when_it_begins() -> None:
    async def test() -> None:
        metrics = GatewayMetrics()
        client = FakeClient()
        counted = CountedProtocol(client, metrics, "/ui")
        stream = counted.response_stream(200, [], b"a")
        await stream.send_bytes(b"b")
        assert client.body == b"ab"
        assert metrics.requests == {("/ui", "", 200): 1}

    asyncio.run(test())
