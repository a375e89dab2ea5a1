"""Failure handling through `llmgw server`, with sim faults switched at run time: a
replica refusing, erroring, hanging or cutting a stream; breakers opening and
recovering; fallbacks to another model; a client that leaves mid-stream."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from llmgw.testing.server import GatewayProcess, start_gateway
from llmgw.testing.sim import SimEngineProcess
from support.clients import ClientFactory
from support.sims import endpoint, set_fault, sim, sim_state

BODY: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
Pair = tuple[SimEngineProcess, SimEngineProcess]


def ask(make_client: ClientFactory, gateway: GatewayProcess, model: str = "m", **extra: Any) -> Any:
    return make_client(gateway).chat.completions.with_raw_response.create(
        model=model, messages=[{"role": "user", "content": "hello"}], max_tokens=3, **extra
    )


@pytest.fixture
def pair() -> Iterator[tuple[SimEngineProcess, SimEngineProcess]]:
    a, b = sim("--model", "m"), sim("--model", "m")
    try:
        yield a, b
    finally:
        a.stop()
        b.stop()


def gateway_for(
    *endpoints: dict[str, Any], router: dict[str, Any] | None = None, **extra: Any
) -> GatewayProcess:
    return start_gateway({"endpoints": list(endpoints), "router": router or {}, **extra})


def test_refused_replica_is_retried_elsewhere_and_its_breaker_opens(
    make_client: ClientFactory,
    pair: Pair,
) -> None:
    a, b = pair
    set_fault(a, "refuse")
    gw = gateway_for(
        endpoint("a", a, "m"),
        endpoint("b", b, "m"),
        router={"failure_threshold": 2, "cooldown": "30s", "default_profile": "round_robin"},
    )
    try:
        replicas = [ask(make_client, gw).headers["x-llmgw-replica"] for _ in range(8)]
        assert set(replicas) == {"b"}
        metrics = httpx.get(gw.admin_url + "/metrics", timeout=5).text
        assert 'llmgw_endpoint_breaker_open{endpoint="a"} 1.0' in metrics
        assert "llmgw_retries_total" in metrics
    finally:
        gw.stop()


@pytest.mark.parametrize("status", ["500", "503", "429"])
def test_error_status_is_retried_on_another_replica(
    make_client: ClientFactory, pair: Pair, status: str
) -> None:
    a, b = pair
    set_fault(a, status)
    gw = gateway_for(endpoint("a", a, "m"), endpoint("b", b, "m"), router={"prefix": {"enabled": False}})
    try:
        for _ in range(4):
            assert ask(make_client, gw).headers["x-llmgw-replica"] == "b"
    finally:
        gw.stop()


@pytest.mark.parametrize(("fault", "code"), [("500", "upstream_unavailable"), ("503", "no_capacity")])
def test_every_replica_failing_is_503_with_retry_after(pair: Pair, fault: str, code: str) -> None:
    """Replicas that failed are `upstream_unavailable`; `no_capacity` is for full ones."""
    a, b = pair
    set_fault(a, fault)
    set_fault(b, fault)
    gw = gateway_for(endpoint("a", a, "m"), endpoint("b", b, "m"))
    try:
        response = httpx.post(
            gw.base_url + "/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "x"}]},
            timeout=10,
        )
        assert response.status_code == 503
        assert int(response.headers["retry-after"]) >= 1
        assert response.json()["error"]["code"] == code
    finally:
        gw.stop()


def test_hung_replica_is_504_when_nothing_else_can_answer(
    pair: Pair,
) -> None:
    a, _ = pair
    set_fault(a, "hang-headers")
    gw = gateway_for(
        endpoint("a", a, "m"), router={"timeouts": {"generation": "500ms", "response_header": "500ms"}}
    )
    try:
        plain = httpx.post(
            gw.base_url + "/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "x"}]},
            timeout=10,
        )
        assert plain.status_code == 504
        assert "router.timeouts.generation" in plain.json()["error"]["message"]
        streamed = httpx.post(
            gw.base_url + "/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": True},
            timeout=10,
        )
        assert streamed.status_code == 504
        assert "router.timeouts.response_header" in streamed.json()["error"]["message"]
    finally:
        gw.stop()


@pytest.mark.parametrize("fault", ["cut-stream", "hang-stream"])
def test_stream_broken_after_it_began_ends_with_an_error_event(
    make_client: ClientFactory, pair: Pair, fault: str
) -> None:
    a, _ = pair
    set_fault(a, fault, stream_tokens=2)
    gw = gateway_for(endpoint("a", a, "m"), router={"timeouts": {"idle": "500ms"}})
    try:
        with httpx.stream(
            "POST",
            gw.base_url + "/chat/completions",
            json={
                "model": "m",
                "messages": [{"role": "user", "content": "x"}],
                "stream": True,
                "max_tokens": 50,
            },
            timeout=10,
        ) as response:
            assert response.status_code == 200
            events = [line for line in response.iter_lines() if line.startswith("data: ")]
        assert events[-1] != "data: [DONE]"
        assert '"error"' in events[-1]
        assert '"stream_interrupted"' in events[-1]
        with pytest.raises(openai.APIError):
            list(
                make_client(gw).chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "x"}], max_tokens=50, stream=True
                )
            )
    finally:
        gw.stop()


def test_breaker_opens_then_one_probe_closes_it(make_client: ClientFactory, pair: Pair) -> None:
    a, b = pair
    gw = gateway_for(
        endpoint("a", a, "m"),
        endpoint("b", b, "m"),
        router={
            "failure_threshold": 1,
            "cooldown": "1s",
            "prefix": {"enabled": False},
            "default_profile": "round_robin",
        },
    )
    try:
        set_fault(a, "500")
        for _ in range(4):
            assert ask(make_client, gw).headers["x-llmgw-replica"] == "b"
        set_fault(a, "none")
        deadline = time.monotonic() + 10
        seen: set[str] = set()
        while "a" not in seen and time.monotonic() < deadline:
            seen.add(ask(make_client, gw).headers["x-llmgw-replica"])
        assert "a" in seen, "the breaker never let a probe through after the cooldown"
    finally:
        gw.stop()


def test_fallback_model_answers_when_the_model_cannot(
    make_client: ClientFactory,
    pair: Pair,
) -> None:
    a, b = pair
    backup = sim("--model", "backup")
    set_fault(a, "refuse")
    gw = gateway_for(
        endpoint("a", a, "m"),
        endpoint("backup-1", backup, "backup"),
        models=[{"name": "m", "fallbacks": ["backup"]}, {"name": "backup"}],
    )
    try:
        raw = ask(make_client, gw)
        assert raw.headers["x-llmgw-model"] == "backup"
        assert raw.headers["x-llmgw-replica"] == "backup-1"
        assert raw.parse().model == "backup"
        metrics = httpx.get(gw.admin_url + "/metrics", timeout=5).text
        assert 'llmgw_fallbacks_total{fallback="backup",model="m"}' in metrics
    finally:
        gw.stop()
        backup.stop()
    del b


def test_client_leaving_a_stream_stops_the_replica_generating(
    pair: Pair,
) -> None:
    slow = sim("--model", "m", "--decode-ms", "50")
    gw = gateway_for(endpoint("slow", slow, "m"))
    try:
        with httpx.stream(
            "POST",
            gw.base_url + "/chat/completions",
            json={
                "model": "m",
                "messages": [{"role": "user", "content": "x"}],
                "stream": True,
                "max_tokens": 2000,
            },
            timeout=10,
        ) as response:
            lines = response.iter_lines()
            next(lines)
            assert sim_state(slow)["running"] == 1
        deadline = time.monotonic() + 5
        while sim_state(slow)["running"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sim_state(slow)["running"] == 0, "the replica kept generating for a client that left"
    finally:
        gw.stop()
        slow.stop()
    del pair


def test_external_provider_fallback_passes_over_a_refused_key(
    make_client: ClientFactory, tmp_path: Path
) -> None:
    local = sim("--model", "local")
    provider = sim("--model", "provider-model", "--api-key", "good-key")
    (tmp_path / "bad").write_text("bad-key\n")
    (tmp_path / "good").write_text("good-key\n")
    set_fault(local, "refuse")
    gw = gateway_for(
        endpoint("local-1", local, "local"),
        router={"default_profile": "round_robin"},
        models=[
            {"name": "local", "fallbacks": ["ext"]},
            {
                "name": "ext",
                "source": "external",
                "external": {
                    "url": provider.url,
                    "model": "provider-model",
                    "api_key_files": [{"file": str(tmp_path / "bad")}, {"file": str(tmp_path / "good")}],
                },
            },
        ],
    )
    try:
        answers = [ask(make_client, gw, model="local") for _ in range(4)]
        assert {a.headers["x-llmgw-model"] for a in answers} == {"ext"}
        assert {a.headers["x-llmgw-replica"] for a in answers} == {"external:ext#2"}
        assert all(a.parse().model == "provider-model" for a in answers)
        metrics = httpx.get(gw.admin_url + "/metrics", timeout=5).text
        assert 'llmgw_endpoint_breaker_open{endpoint="external:ext#1"} 1.0' in metrics
        direct = ask(make_client, gw, model="ext")
        assert direct.headers["x-llmgw-replica"] == "external:ext#2"
    finally:
        gw.stop()
        local.stop()
        provider.stop()
