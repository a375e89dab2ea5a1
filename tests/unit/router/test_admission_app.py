"""Admission on the request path, in process: the gateway built from settings with an
injected clock, its app called with an in-memory client request, and replicas that
answer from memory. The band comes from the header only while auth is off; a request
of a saturated model waits, and is answered 503 with Retry-After in OpenAI's error shape
when it waits past queue_ttl; a client that leaves its queue is forgotten at once and
never reaches a replica."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import orjson
import pytest

from llmgw.config import settings_from_mapping
from llmgw.server.gateway import Gateway

ANSWER = (
    b'{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,'
    b'"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],'
    b'"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}'
)
BODY = b'{"model":"m","max_tokens":4,"messages":[{"role":"user","content":"hello"}]}'


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Conn:
    """A replica connection that answers at once, counting the requests it was sent."""

    def __init__(self) -> None:
        self.sent = 0
        self.closed = False
        self.reusable = True
        self.complete = True
        self.status = 200
        self.headers = [(b"content-type", b"application/json")]

    async def exchange(self, head: bytes, body: bytes) -> int:
        self.sent += 1
        return 200

    async def read_chunk(self) -> bytes | None:
        return None

    async def read_body(self) -> bytes:
        return ANSWER

    def close(self) -> None:
        self.closed = True

    def expire(self, error: Exception) -> None:
        self.closed = True


class Pool:
    host_header = b"127.0.0.1:1"

    def __init__(self) -> None:
        self.conn = Conn()

    async def acquire(self, dial: float) -> tuple[Conn, bool]:
        return self.conn, True

    async def dial(self, dial: float) -> Conn:
        return self.conn

    def release(self, conn: Conn) -> None:
        pass


class Scope:
    proto = "http"
    method = "POST"
    path = "/v1/chat/completions"

    def __init__(self, headers: dict[str, str]) -> None:
        self.headers = {"content-length": str(len(BODY)), **headers}


class Proto:
    """The client's side: the body, the answer written, and a disconnect the test sets."""

    def __init__(self) -> None:
        self.answers: list[tuple[int, dict[str, str], bytes]] = []
        self.gone: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def __call__(self) -> bytes:
        return BODY

    def response_bytes(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.answers.append((status, dict(headers), body))

    async def client_disconnect(self) -> None:
        await self.gone


class Rig:
    def __init__(self, gateway: Gateway, clock: Clock) -> None:
        self.gateway = gateway
        self.clock = clock
        self.pool = Pool()
        for endpoint in gateway.endpoints.all():
            endpoint.pool = self.pool  # type: ignore[assignment]

    @property
    def replica_sent(self) -> int:
        return self.pool.conn.sent

    def busy(self, inflight: int) -> None:
        for endpoint in self.gateway.endpoints.all():
            endpoint.inflight = inflight

    def call(self, band: str | None = None) -> tuple[Proto, asyncio.Task[None]]:
        proto = Proto()
        headers = {} if band is None else {"x-llmgw-band": band}
        task = asyncio.ensure_future(self.gateway.app(Scope(headers), proto))  # type: ignore[arg-type]
        return proto, task


def gateway(*, auth: bool = False, admission: dict[str, Any] | None = None, store: Path | None = None) -> Rig:
    document: dict[str, Any] = {
        "endpoints": [{"id": "r1", "url": "http://127.0.0.1:9", "models": ["m"]}],
        # One request in flight is the whole target: easy to saturate.
        "router": {"scoring": {"target_inflight": 1}, "admission": {"queue_ttl": "2s", **(admission or {})}},
    }
    if auth:
        document["auth"] = {"enabled": True, "store": str(store)}
    clock = Clock()
    return Rig(Gateway(settings_from_mapping(document, source="test", environ={}), clock=clock), clock)


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(test())


async def settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


def error_of(answer: tuple[int, dict[str, str], bytes]) -> dict[str, Any]:
    body = orjson.loads(answer[2])
    assert set(body) == {"error"}
    error: dict[str, Any] = body["error"]
    assert set(error) == {"message", "type", "param", "code"}
    return error


@pytest.mark.parametrize(("header", "band"), [(None, "gold"), ("platinum", "platinum"), ("bronze", "bronze")])
def test_the_band_header_is_honoured_while_auth_is_off(header: str | None, band: str) -> None:
    async def test() -> None:
        r = gateway()
        proto, task = r.call(header)
        await task
        assert [status for status, _, _ in proto.answers] == [200]
        assert r.gateway.flow.counts.admitted == {("m", band): 1}
        r.gateway.close()

    run(test)


def test_an_unknown_band_is_400_in_openais_shape_and_reaches_no_replica() -> None:
    async def test() -> None:
        r = gateway()
        proto, task = r.call("diamond")
        await task
        [answer] = proto.answers
        assert answer[0] == 400
        error = error_of(answer)
        assert error["code"] == "unknown_band"
        assert error["param"] == "band"
        assert error["type"] == "invalid_request_error"
        assert r.replica_sent == 0
        r.gateway.close()

    run(test)


def test_with_auth_on_the_band_header_is_not_believed(tmp_path: Path) -> None:
    """Until keys carry a band, a request under auth gets the default band whatever it
    claims, so a client cannot promote itself (nor fail itself with a bad name)."""

    async def test() -> None:
        r = gateway(auth=True, store=tmp_path / "store.db")
        for claimed in ("platinum", "diamond"):
            proto, task = r.call(claimed)
            await task
            assert [status for status, _, _ in proto.answers] == [200]
        assert r.gateway.flow.counts.admitted == {("m", "gold"): 2}
        r.gateway.close()

    run(test)


def test_a_saturated_model_queues_the_request_and_serves_it_when_capacity_frees() -> None:
    async def test() -> None:
        r = gateway()
        r.busy(1)
        proto, task = r.call("gold")
        await settle()
        assert not task.done()
        assert r.gateway.flow.queued("m") == {"gold": 1}
        assert r.replica_sent == 0
        r.busy(0)
        r.clock.now += 0.3
        assert r.gateway.flow.release() == 1
        await task
        assert [status for status, _, _ in proto.answers] == [200]
        assert r.replica_sent == 1
        flow = dict(r.gateway.flow.models())["m"]
        assert flow.pending == 0  # dispatched: the replica's in-flight count took over
        assert r.gateway.flow.counts.waited[("m", "gold")].total == pytest.approx(0.3)
        r.gateway.close()

    run(test)


def test_a_request_waiting_past_queue_ttl_is_503_with_retry_after_in_openais_shape() -> None:
    async def test() -> None:
        r = gateway(admission={"queue_ttl": "8s"})
        r.busy(1)
        proto, task = r.call("silver")
        await settle()
        r.clock.now += 8.0
        r.gateway.flow.release()
        await task
        [answer] = proto.answers
        assert answer[0] == 503
        assert answer[1]["retry-after"] == "2"
        error = error_of(answer)
        assert error["code"] == "queue_timeout"
        assert error["type"] == "service_unavailable"
        assert r.replica_sent == 0
        assert r.gateway.flow.counts.expired == {("m", "silver"): 1}
        r.gateway.close()

    run(test)


def test_a_full_queue_answers_503_queue_full_at_once() -> None:
    async def test() -> None:
        r = gateway(admission={"queue_capacity_per_band": 1})
        r.busy(1)
        _, first = r.call("gold")
        await settle()
        proto, second = r.call("gold")
        await second
        [answer] = proto.answers
        assert answer[0] == 503
        assert int(answer[1]["retry-after"]) >= 1
        assert error_of(answer)["code"] == "queue_full"
        assert not first.done()
        first.cancel()
        await asyncio.gather(first, return_exceptions=True)
        r.gateway.close()

    run(test)


def test_a_client_that_leaves_its_queue_is_forgotten_and_never_reaches_a_replica() -> None:
    async def test() -> None:
        r = gateway()
        r.busy(1)
        proto, task = r.call("gold")
        await settle()
        assert r.gateway.flow.queued("m") == {"gold": 1}
        proto.gone.set_result(None)  # the client closed its connection
        await settle()
        assert task.done()
        assert not task.cancelled()  # the app absorbs the cancellation of a departed client
        assert r.gateway.flow.queued("m") == {"gold": 0}
        assert proto.answers == []
        r.busy(0)
        assert r.gateway.flow.release() == 0
        assert r.replica_sent == 0
        assert dict(r.gateway.flow.models())["m"].pending == 0
        assert len(r.gateway.departures) == 0
        r.gateway.close()

    run(test)


def test_with_admission_off_a_saturated_model_is_sent_the_request_at_once() -> None:
    async def test() -> None:
        r = gateway(admission={"enabled": False})
        r.busy(1)
        proto, task = r.call("bronze")
        await task
        assert [status for status, _, _ in proto.answers] == [200]
        assert r.replica_sent == 1
        assert r.gateway.flow.counts.admitted == {}
        r.gateway.close()

    run(test)
