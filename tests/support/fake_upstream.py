"""A replica without a process or a socket: a scripted asyncio transport under the real
`Connection`, a pool that dials it, and a client side that records what it is sent.

Each request a connection carries is answered with the replica's script (bytes handed
to the connection's parser as if read from a socket); after it the connection stays
open, so a test can push more, cut it, or let a deadline pass. Deadlines are passed by
sweeping the watchdog at a chosen time (its injected clock), never by waiting.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from llmgw.errors import DialError
from llmgw.http.rsgi import ProtocolClosed
from llmgw.router.affinity import SessionAffinity
from llmgw.router.breaker import Breaker
from llmgw.router.dispatch import Dispatcher
from llmgw.router.endpoints import Endpoint, EndpointRegistry, EndpointSpec
from llmgw.router.forward import PhaseLimits
from llmgw.router.metrics import GatewayMetrics
from llmgw.router.picker import Picker, PrefixRules
from llmgw.router.request import ClientRequest, Kind, parse_request
from llmgw.router.scoring import ScoringTargets
from llmgw.router.targets import Target
from llmgw.router.usage import UsageSink
from llmgw.upstream import Connection, OriginPool, UpstreamClient
from llmgw.upstream.watchdog import Watchdog

LIMITS = PhaseLimits(
    dial_s=1.0,
    response_header_s=5.0,
    generation_s=60.0,
    first_token_s=10.0,
    idle_s=3.0,
    total_s=120.0,
    replica_fresh_s=10.0,
)


def head(status: int = 200, content_type: str = "text/event-stream", length: int | None = None) -> bytes:
    framing = f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    return f"HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\n{framing}\r\n\r\n".encode()


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def event(payload: str) -> bytes:
    return chunk(f"data: {payload}\n\n".encode())


END = b"0\r\n\r\n"


def json_answer(status: int, body: dict[str, Any]) -> bytes:
    data = orjson.dumps(body)
    return head(status, "application/json", len(data)) + data


class FakeTransport(asyncio.Transport):
    """The connection's socket: what the gateway writes is recorded and answered with
    the replica's script."""

    def __init__(self, conn: Connection, replica: FakeReplica) -> None:
        super().__init__()
        self.conn = conn
        self.replica = replica
        self.written: list[bytes] = []
        self.requests = 0
        self.closed = False
        self.paused = False

    def write(self, data: Any) -> None:
        if self.closed:
            # A socket the replica closed meanwhile: the write finds out.
            asyncio.get_running_loop().call_soon(self.conn.connection_lost, None)
            return
        self.written.append(bytes(data))
        if data.startswith(b"POST "):
            self.requests += 1
            self.replica.requests += 1
            for part in self.replica.script:
                self.push(part)

    def push(self, data: bytes) -> None:
        """Bytes from the replica, delivered on the next turn of the loop."""
        asyncio.get_running_loop().call_soon(self._deliver, data)

    def _deliver(self, data: bytes) -> None:
        if not self.closed:
            self.conn.data_received(data)

    def cut(self) -> None:
        """The replica drops the connection."""
        if not self.closed:
            self.closed = True
            self.conn.connection_lost(None)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            asyncio.get_running_loop().call_soon(self.conn.connection_lost, None)

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False


@dataclass
class FakeReplica:
    """What a replica answers each request with, and what it saw."""

    script: list[bytes] = field(default_factory=list)
    refuse: bool = False
    requests: int = 0
    connections: list[FakeTransport] = field(default_factory=list)

    @property
    def last(self) -> FakeTransport:
        return self.connections[-1]


class FakePool(OriginPool):
    """The real pool (reuse, release), dialling the fake replica instead of a socket."""

    def __init__(self, replica: FakeReplica) -> None:
        super().__init__("replica.test", 8000, None)
        self.replica = replica
        self.dials = 0

    async def dial(self, dial_timeout: float) -> Connection:
        self.dials += 1
        if self.replica.refuse:
            raise DialError("could not connect to a replica: Connection refused")
        conn = Connection()
        transport = FakeTransport(conn, self.replica)
        conn.connection_made(transport)
        self.replica.connections.append(transport)
        return conn


class FakeClient:
    """The gateway's client side of one request (`HTTPProtocol`), recording the answer."""

    def __init__(self) -> None:
        self.status = 0
        self.headers: list[tuple[str, str]] = []
        self.body = b""
        self.gone = False

    async def __call__(self) -> bytes:
        return b""

    def __aiter__(self) -> Any:
        raise NotImplementedError

    def response_bytes(self, status: int, headers: list[tuple[str, str]], body: bytes, /) -> None:
        self.status, self.headers, self.body = status, headers, body

    def response_stream(
        self, status: int, headers: list[tuple[str, str]], first: bytes = b"", /
    ) -> FakeClient:
        self.status, self.headers, self.body = status, headers, first
        return self

    async def send_bytes(self, data: bytes, /) -> None:
        if self.gone:
            raise ProtocolClosed("the client went away")
        self.body += data

    async def client_disconnect(self) -> None:
        raise NotImplementedError


class Rig:
    """A dispatcher over fake replicas `a`, `b`, ... of model `m`."""

    def __init__(self, *scripts: list[bytes], limits: PhaseLimits = LIMITS, retries: int = 1) -> None:
        self.metrics = GatewayMetrics()
        self.watchdog = Watchdog()
        self.endpoints = EndpointRegistry(UpstreamClient(), failure_threshold=5, cooldown=30.0)
        ids = [chr(ord("a") + i) for i in range(len(scripts))]
        self.endpoints.publish(EndpointSpec(id=i, url=f"http://{i}.test:8000", models=("m",)) for i in ids)
        self.replicas: dict[str, FakeReplica] = {}
        self.pools: dict[str, FakePool] = {}
        for endpoint, script in zip(self.endpoints.for_model("m"), scripts, strict=True):
            replica = self.replicas[endpoint.id] = FakeReplica(list(script))
            endpoint.pool = self.pools[endpoint.id] = FakePool(replica)
        picker = Picker(
            ScoringTargets(
                target_waiting=8.0,
                target_inflight=4.0,
                kv_ceiling=0.8,
                session_load_factor=1.5,
                stale_after=10.0,
            ),
            SessionAffinity(max_sessions=10, ttl=60.0),
            None,
            PrefixRules(min_match=8, match_ratio=0.5, balance_abs=4.0, balance_rel=1.5),
        )
        self.dispatcher = Dispatcher(
            self.endpoints,
            picker,
            self.metrics,
            UsageSink(self.metrics),
            self.watchdog,
            limits,
            retries=retries,
            inject_usage=False,
            retry_after=1.0,
        )

    def endpoint(self, endpoint_id: str) -> Endpoint:
        return next(e for e in self.endpoints.for_model("m") if e.id == endpoint_id)

    def serve(self, client: FakeClient, stream: bool) -> asyncio.Task[None]:
        """The request, served in a task (a test moves it along with `settle` and sweeps)."""
        return asyncio.get_running_loop().create_task(
            self.dispatcher.serve(
                client, chat(stream), [Target("m", "m", "chat")], "req-1", self.dispatcher_clock()
            )
        )

    def dispatcher_clock(self) -> float:
        clock: Callable[[], float] = self.dispatcher._clock
        return clock()

    def expire(self, after_s: float) -> int:
        """Sweeps the watchdog as if `after_s` seconds had passed; returns how many expired."""
        return self.watchdog.sweep(asyncio.get_running_loop().time() + after_s)

    def breaker(self, endpoint_id: str) -> Breaker:
        return self.endpoint(endpoint_id).breaker


def chat(stream: bool) -> ClientRequest:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": stream}
    return parse_request(Kind.CHAT, orjson.dumps(body))


async def settle(turns: int = 20) -> None:
    """Lets the loop run what is ready (bounded), so scripted bytes reach their reader."""
    for _ in range(turns):
        await asyncio.sleep(0)
