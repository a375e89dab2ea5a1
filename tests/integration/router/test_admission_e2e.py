"""Admission through `llmgw server`, with a slow sim engine behind it (one sequence at a
time, 50 ms a token) and `router.scoring.target_inflight: 1`, so one request in flight
saturates the model and everything after it queues. Each bound is exercised for real:
queue_ttl, the per-band capacity, the total with the lowest band's newest shed, a queued
client that leaves, SLO hold-back; then the band header (believed only with auth off; with auth on the band
comes from the key, tests/integration/auth/test_auth_gateway.py), the wait for an
on-demand model's replica, and the metric families.

The two gateways are started together, once, for the module; every test leaves its
gateway with empty queues and the sim idle.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast
from urllib.parse import urlsplit

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from llmgw.testing.server import GatewayProcess, free_port, start_gateway
from llmgw.testing.sim import SimEngineProcess, start_sim_engine
from support.sims import endpoint

pytestmark = pytest.mark.slow

SLOW_SIM = (
    "--model",
    "m",
    "--model",
    "s",  # the same replica under a second name, whose catalog entry has an SLO
    "--max-seqs",
    "1",
    "--decode-ms",
    "50",
    "--decode-ms-per-seq",
    "0",
    "--prefill-ms-per-token",
    "0.01",
    "--default-max-tokens",
    "4",
)
# Long enough to hold the replica for the whole of any test; cut short by closing it.
BLOCKER_TOKENS = 2000
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _config(sim: SimEngineProcess, admission: dict[str, Any], **extra: Any) -> dict[str, Any]:
    router = {
        "scoring": {"target_inflight": 1},
        "scrape_interval": "200ms",
        "admission": admission,
        **extra.pop("router", {}),
    }
    return {"endpoints": [endpoint("slow", sim, "m", "s")], "router": router, **extra}


@pytest.fixture(scope="module")
def slow() -> Iterator[SimEngineProcess]:
    engine = start_sim_engine(*SLOW_SIM)
    try:
        yield engine
    finally:
        engine.stop()


@pytest.fixture(scope="module")
def gateways(slow: SimEngineProcess) -> Iterator[dict[str, GatewayProcess | Exception]]:
    configs = {
        # Long TTL: what is queued stays queued while the test looks at it.
        "bounds": _config(
            slow,
            {"queue_ttl": "20s", "queue_capacity_per_band": 2, "queue_capacity_total": 3},
            models=[{"name": "m"}, {"name": "s", "slo": {"ttft_p99": "1ms", "tpot_p99": "1ms"}}],
        ),
        "ttl": _config(
            slow,
            {"queue_ttl": "500ms"},
            router={"activation_wait": "300ms"},
            # A model with profiles brings the control plane (no agent ever connects).
            agent_listen=f"127.0.0.1:{free_port()}",
            agent_insecure=True,
            models=[
                {"name": "m"},
                {"name": "cold", "source": "org/cold", "profiles": [{"name": "p", "gpu_class": "l4-24g"}]},
            ],
        ),
    }

    def start(config: dict[str, Any]) -> GatewayProcess | Exception:
        try:
            return start_gateway(config, timeout=60.0)
        except RuntimeError as exc:
            return exc

    with ThreadPoolExecutor(len(configs)) as pool:
        started = dict(zip(configs, pool.map(start, configs.values()), strict=True))
    try:
        yield started
    finally:
        running = [handle for handle in started.values() if isinstance(handle, GatewayProcess)]
        with ThreadPoolExecutor(len(running) or 1) as pool:
            list(pool.map(GatewayProcess.stop, running))


def gateway_named(gateways: dict[str, GatewayProcess | Exception], name: str) -> GatewayProcess:
    handle = gateways[name]
    if isinstance(handle, Exception):
        raise handle
    return handle


# --- client side -----------------------------------------------------------------------------------


def chat(max_tokens: int = 2, *, stream: bool = False, model: str = "m") -> dict[str, Any]:
    return {
        "model": model,
        "messages": [{"role": "user", "content": "hello"}],
        "max_tokens": max_tokens,
        "stream": stream,
    }


async def ask(client: httpx.AsyncClient, gw: GatewayProcess, band: str | None, **body: Any) -> httpx.Response:
    headers = {} if band is None else {"x-llmgw-band": band}
    return await client.post(gw.base_url + "/chat/completions", json=chat(**body), headers=headers)


async def scrape(client: httpx.AsyncClient, gw: GatewayProcess) -> Samples:
    text = (await client.get(gw.admin_url + "/metrics")).text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def key(name: str, band: str, model: str = "m") -> tuple[str, tuple[tuple[str, str], ...]]:
    return (name, (("band", band), ("model", model)))


async def depth(client: httpx.AsyncClient, gw: GatewayProcess, band: str) -> float:
    return (await scrape(client, gw)).get(key("llmgw_admission_queue_depth", band), 0.0)


async def until(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 10.0) -> float:
    """Polls `check` until it holds; the seconds it took."""
    started = time.monotonic()
    while not await check():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"not within {timeout}s: {what}")
        await asyncio.sleep(0.02)
    return time.monotonic() - started


async def sim_state(client: httpx.AsyncClient, sim: SimEngineProcess) -> dict[str, Any]:
    state: dict[str, Any] = (await client.get(sim.admin_url + "/sim/state")).json()
    return state


async def sim_idle(client: httpx.AsyncClient, sim: SimEngineProcess) -> None:
    async def idle() -> bool:
        state = await sim_state(client, sim)
        return bool(state["running"] == 0 and state["waiting"] == 0)

    await until(idle, "the sim to be idle")


async def queued(client: httpx.AsyncClient, gw: GatewayProcess, band: str, count: int) -> None:
    async def check() -> bool:
        return await depth(client, gw, band) == count

    await until(check, f"{count} {band} request(s) queued")


@contextlib.asynccontextmanager
async def occupied(client: httpx.AsyncClient, gw: GatewayProcess) -> AsyncIterator[None]:
    """Holds the only replica with a long stream; leaving closes it, which frees it."""
    async with client.stream(
        "POST",
        gw.base_url + "/chat/completions",
        json=chat(BLOCKER_TOKENS, stream=True),
        headers={"x-llmgw-band": "platinum"},
    ) as response:
        assert response.status_code == 200
        # Held in a name: a line iterator that is dropped closes the response with it.
        lines = cast(AsyncGenerator[str, None], response.aiter_lines())
        try:
            await anext(lines)  # the replica is generating for it
            yield
        finally:
            await lines.aclose()


def error_of(response: httpx.Response) -> dict[str, Any]:
    """The OpenAI error envelope, checked for shape."""
    body = response.json()
    assert set(body) == {"error"}
    error: dict[str, Any] = body["error"]
    assert set(error) == {"message", "type", "param", "code"}
    if response.status_code == 503:
        assert error["type"] == "service_unavailable"
    return error


def run(test: Callable[[httpx.AsyncClient], Awaitable[None]]) -> None:
    async def main() -> None:
        async with httpx.AsyncClient(timeout=30.0) as client:
            await test(client)

    asyncio.run(main())


# --- the bounds ------------------------------------------------------------------------------------


def test_a_request_queued_past_queue_ttl_is_503_with_retry_after(
    gateways: dict[str, GatewayProcess | Exception], slow: SimEngineProcess
) -> None:
    gw = gateway_named(gateways, "ttl")

    async def test(client: httpx.AsyncClient) -> None:
        await sim_idle(client, slow)
        seen = (await sim_state(client, slow))["requests_seen"]
        async with occupied(client, gw):
            started = time.monotonic()
            plain = await ask(client, gw, "gold")
            waited = time.monotonic() - started
            streamed = await ask(client, gw, "gold", stream=True)
        for response in (plain, streamed):
            assert response.status_code == 503
            assert response.headers["retry-after"] == "1"
            error = error_of(response)
            assert error["code"] == "queue_timeout"
            assert "queue_ttl" in error["message"]
        assert waited >= 0.45, "refused before it waited out queue_ttl"
        assert waited < 5.0
        await sim_idle(client, slow)
        assert (await sim_state(client, slow))["requests_seen"] == seen + 1  # the blocker only
        metrics = await scrape(client, gw)
        assert metrics[key("llmgw_admission_expired_total", "gold")] == 2
        assert metrics[key("llmgw_admission_queued_total", "gold")] == 2
        assert metrics[key("llmgw_admission_queue_depth", "gold")] == 0

    run(test)


def test_a_full_band_queue_refuses_at_once_while_other_bands_still_queue(
    gateways: dict[str, GatewayProcess | Exception], slow: SimEngineProcess
) -> None:
    gw = gateway_named(gateways, "bounds")

    async def test(client: httpx.AsyncClient) -> None:
        await sim_idle(client, slow)
        before = await scrape(client, gw)
        async with occupied(client, gw):
            first = asyncio.ensure_future(ask(client, gw, "silver"))
            second = asyncio.ensure_future(ask(client, gw, "silver"))
            await queued(client, gw, "silver", 2)
            started = time.monotonic()
            refused = await ask(client, gw, "silver")
            assert time.monotonic() - started < 5.0  # at once, not after the 20 s TTL
            assert refused.status_code == 503
            assert refused.headers["retry-after"] == "5"  # a quarter of queue_ttl
            error = error_of(refused)
            assert error["code"] == "queue_full"
            assert "queue_capacity_per_band" in error["message"]
            gold = asyncio.ensure_future(ask(client, gw, "gold"))  # its own band has room
            await queued(client, gw, "gold", 1)
        answers = await asyncio.gather(first, second, gold)
        assert [a.status_code for a in answers] == [200, 200, 200]
        after = await scrape(client, gw)
        shed = key("llmgw_admission_shed_total", "silver")
        assert after[shed] - before.get(shed, 0.0) == 1
        await sim_idle(client, slow)

    run(test)


def test_a_full_total_sheds_the_newest_of_the_lowest_band_for_a_higher_one(
    gateways: dict[str, GatewayProcess | Exception], slow: SimEngineProcess
) -> None:
    gw = gateway_named(gateways, "bounds")
    order: list[str] = []

    async def tagged(client: httpx.AsyncClient, tag: str, band: str) -> httpx.Response:
        response = await ask(client, gw, band)
        order.append(tag)
        return response

    async def test(client: httpx.AsyncClient) -> None:
        await sim_idle(client, slow)
        before = await scrape(client, gw)
        async with occupied(client, gw):
            older = asyncio.ensure_future(tagged(client, "bronze-older", "bronze"))
            await queued(client, gw, "bronze", 1)
            newer = asyncio.ensure_future(tagged(client, "bronze-newer", "bronze"))
            await queued(client, gw, "bronze", 2)
            silver = asyncio.ensure_future(tagged(client, "silver", "silver"))
            await queued(client, gw, "silver", 1)  # three queued: the total
            gold = asyncio.ensure_future(tagged(client, "gold", "gold"))
            shed = await asyncio.wait_for(newer, 10.0)
            assert shed.status_code == 503
            assert int(shed.headers["retry-after"]) >= 1
            assert error_of(shed)["code"] == "queue_full"
            await queued(client, gw, "gold", 1)
            assert await depth(client, gw, "bronze") == 1
            assert not older.done()
            assert not silver.done()
        answers = await asyncio.gather(gold, silver, older)
        assert [a.status_code for a in answers] == [200, 200, 200]
        # Released highest band first once the replica was free.
        assert order == ["bronze-newer", "gold", "silver", "bronze-older"]
        after = await scrape(client, gw)
        for band, shed_count in (("bronze", 1), ("silver", 0), ("gold", 0)):
            name = key("llmgw_admission_shed_total", band)
            assert after.get(name, 0.0) - before.get(name, 0.0) == shed_count
        await sim_idle(client, slow)

    run(test)


def test_a_queued_client_that_disconnects_leaves_the_queue_and_never_reaches_the_replica(
    gateways: dict[str, GatewayProcess | Exception], slow: SimEngineProcess
) -> None:
    gw = gateway_named(gateways, "bounds")
    address = urlsplit(gw.url)

    async def test(client: httpx.AsyncClient) -> None:
        await sim_idle(client, slow)
        seen = (await sim_state(client, slow))["requests_seen"]
        admitted_before = (await scrape(client, gw)).get(key("llmgw_admission_admitted_total", "gold"), 0.0)
        async with occupied(client, gw):
            reader, writer = await asyncio.open_connection(address.hostname, address.port)
            body = json.dumps(chat()).encode()
            writer.write(
                b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\n"
                b"content-type: application/json\r\nx-llmgw-band: gold\r\n"
                b"content-length: %d\r\n\r\n%s" % (len(body), body)
            )
            await writer.drain()
            await queued(client, gw, "gold", 1)
            writer.close()
            await writer.wait_closed()
            gone_in = await until(
                lambda: _depth_is(client, gw, "gold", 0), "the queue to forget the client", timeout=5.0
            )
            assert gone_in < 2.0
            assert await reader.read() == b""  # nothing was ever answered
        await sim_idle(client, slow)
        assert (await sim_state(client, slow))["requests_seen"] == seen + 1  # the blocker only
        admitted = (await scrape(client, gw)).get(key("llmgw_admission_admitted_total", "gold"), 0.0)
        assert admitted == admitted_before

    run(test)


async def _depth_is(
    client: httpx.AsyncClient, gw: GatewayProcess, band: str, count: int, model: str = "m"
) -> bool:
    return (await scrape(client, gw)).get(key("llmgw_admission_queue_depth", band, model), 0.0) == count


def test_a_breached_slo_holds_gold_back_while_platinum_is_admitted(
    gateways: dict[str, GatewayProcess | Exception], slow: SimEngineProcess
) -> None:
    """Model `s` has objectives of 1 ms to the first token and 1 ms a token, which one
    streamed answer from a 50 ms-a-token replica misses (its time to the first token is
    about a millisecond, so the time per token is the objective it surely misses): from
    then on only platinum is admitted to it, although the replica is idle."""
    gw = gateway_named(gateways, "bounds")
    held: list[asyncio.Future[httpx.Response]] = []

    async def gold_held_back(client: httpx.AsyncClient) -> bool:
        # Accounting runs off the request path, and the verdict is cached for half a
        # second: a gold request may still get through (unstreamed, it adds no sample).
        request = asyncio.ensure_future(ask(client, gw, "gold", model="s"))
        while not request.done():
            if (await scrape(client, gw)).get(key("llmgw_admission_queue_depth", "gold", "s")) == 1:
                held.append(request)
                return True
            await asyncio.sleep(0.02)
        assert request.result().status_code == 200
        return False

    async def test(client: httpx.AsyncClient) -> None:
        await sim_idle(client, slow)
        assert (await ask(client, gw, "gold", model="s")).status_code == 200  # no samples: no hold-back
        assert (await ask(client, gw, "platinum", model="s", stream=True)).status_code == 200
        await until(lambda: gold_held_back(client), "gold to be held back", timeout=15.0)
        assert (await sim_state(client, slow))["running"] == 0  # held back, not saturated
        assert (await ask(client, gw, "platinum", model="s")).status_code == 200
        metrics = await scrape(client, gw)
        assert metrics[key("llmgw_admission_queue_depth", "gold", "s")] == 1  # still waiting
        assert metrics[key("llmgw_admission_admitted_total", "platinum", "s")] == 2
        assert not held[0].done()
        held[0].cancel()  # the client gives up (the TTL is 20 s here)
        await asyncio.gather(held[0], return_exceptions=True)
        await until(lambda: _depth_is(client, gw, "gold", 0, "s"), "the held request to leave")
        # The other model behind the same replica is not held back.
        assert (await ask(client, gw, "gold")).status_code == 200
        await sim_idle(client, slow)

    run(test)


# --- bands, activation, metrics --------------------------------------------------------------------


def test_the_band_header_is_honoured_with_auth_off(
    gateways: dict[str, GatewayProcess | Exception], slow: SimEngineProcess
) -> None:
    gw = gateway_named(gateways, "bounds")

    async def test(client: httpx.AsyncClient) -> None:
        await sim_idle(client, slow)
        before = await scrape(client, gw)
        unknown = await ask(client, gw, "diamond")
        assert unknown.status_code == 400
        error = error_of(unknown)
        assert error["code"] == "unknown_band"
        assert error["param"] == "band"
        assert (await ask(client, gw, "platinum")).status_code == 200
        assert (await ask(client, gw, None)).status_code == 200
        after = await scrape(client, gw)
        for band in ("platinum", "gold"):
            name = key("llmgw_admission_admitted_total", band)
            assert after[name] - before.get(name, 0.0) == 1

    run(test)


def test_a_model_with_no_replica_is_503_model_not_ready_after_activation_wait(
    gateways: dict[str, GatewayProcess | Exception],
) -> None:
    gw = gateway_named(gateways, "ttl")

    async def test(client: httpx.AsyncClient) -> None:
        started = time.monotonic()
        response = await ask(client, gw, "gold", model="cold")
        waited = time.monotonic() - started
        assert response.status_code == 503
        assert response.headers["retry-after"] == "1"
        error = error_of(response)
        assert error["code"] == "model_not_ready"
        assert "router.activation_wait" in error["message"]
        assert 0.25 <= waited < 5.0

    run(test)


def test_the_admission_metric_families_are_exported(gateways: dict[str, GatewayProcess | Exception]) -> None:
    gw = gateway_named(gateways, "bounds")
    text = httpx.get(gw.admin_url + "/metrics", timeout=10).text
    for family, kind in (
        ("llmgw_admission_queue_depth", "gauge"),
        ("llmgw_admission_admitted_total", "counter"),
        ("llmgw_admission_queued_total", "counter"),
        ("llmgw_admission_expired_total", "counter"),
        ("llmgw_admission_shed_total", "counter"),
        ("llmgw_admission_wait_seconds", "histogram"),
    ):
        assert f"# TYPE {family} {kind}" in text
