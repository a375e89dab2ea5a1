"""Hostile and faulty input through `llmgw server`: malformed bodies are a 400 naming the
parameter with no traceback in the server's log; a replica that accepts a connection
and never answers does not hold a non-streamed request (default `generation: 0`) past
`response_header` while another replica can answer, and a slow one that keeps answering
its metrics is waited for; the 504 names the bound that fired and the server logs the
failed try."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from llmgw.testing.server import GatewayProcess, start_gateway
from llmgw.testing.sim import SimEngineProcess
from support.sims import endpoint, sim

# Starting a server is slow on a loaded machine; the bound only stops a hung start.
START_TIMEOUT_S = 120.0


def _start(config: dict[str, Any]) -> GatewayProcess:
    return start_gateway(config, timeout=START_TIMEOUT_S)


CHAT = {"model": "m", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 4}


@pytest.fixture(scope="module")
def replica() -> Iterator[SimEngineProcess]:
    engine = sim("--model", "m")
    try:
        yield engine
    finally:
        engine.stop()


@pytest.fixture
def silent() -> Iterator[str]:
    """A replica address whose kernel accepts connections that nobody ever reads or
    answers: a wedged engine process as the network sees it."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()


@pytest.fixture(scope="module")
def gateway(replica: SimEngineProcess) -> Iterator[GatewayProcess]:
    gw = _start({"endpoints": [endpoint("r", replica, "m"), endpoint("e", replica, "e")]})
    try:
        yield gw
    finally:
        gw.stop()


def _post(gw: GatewayProcess, path: str, body: bytes) -> httpx.Response:
    return httpx.post(
        gw.base_url + path, content=body, headers={"content-type": "application/json"}, timeout=10
    )


def _chat(content: Any) -> bytes:
    return orjson.dumps({"model": "m", "messages": [{"role": "user", "content": content}]})


# The worst of what the fuzz of router/request.py finds, through a real socket.
WORST = [
    pytest.param("/chat/completions", _chat([{"type": "text", "text": 5}]), "messages[0].content[0].text"),
    pytest.param("/chat/completions", _chat([{"type": "text", "text": None}]), "messages[0].content[0].text"),
    pytest.param(
        "/chat/completions", _chat([{"type": "text", "text": ["a"]}]), "messages[0].content[0].text"
    ),
    pytest.param("/chat/completions", _chat(["stray"]), "messages[0].content[0]"),
    pytest.param("/chat/completions", _chat({"type": "text"}), "messages[0].content"),
    pytest.param(
        "/chat/completions",
        orjson.dumps(
            {
                "model": "m",
                "messages": [{"role": "assistant", "tool_calls": [{"function": {"arguments": {}}}]}],
            }
        ),
        "messages[0].tool_calls[0].function.name",
    ),
    pytest.param("/chat/completions", orjson.dumps({**CHAT, "stream_options": 1}), "stream_options"),
    pytest.param("/chat/completions", b"[" * 5000 + b"]" * 5000, None),
    pytest.param("/chat/completions", b'{"model": "m", "messages": [], "n": 1' + b"0" * 400 + b"}", None),
    pytest.param("/completions", orjson.dumps({"model": "m", "prompt": ["a", None]}), "prompt[1]"),
    pytest.param("/completions", orjson.dumps({"model": "m", "prompt": [[1], [True]]}), "prompt[1]"),
    pytest.param("/embeddings", orjson.dumps({"model": "e", "input": [{"a": 1}]}), "input"),
]


@pytest.mark.parametrize(("path", "body", "param"), WORST)
def test_a_malformed_body_is_a_400_naming_the_parameter_without_a_traceback(
    gateway: GatewayProcess, path: str, body: bytes, param: str | None
) -> None:
    response = _post(gateway, path, body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    assert "Traceback" not in gateway.log()
    assert " 500 " not in gateway.log()


def _silent_and_healthy(silent: str, replica: SimEngineProcess) -> GatewayProcess:
    # Round robin: of two requests, one tries the silent replica first.
    return _start(
        {
            "endpoints": [
                {"id": "w", "url": silent, "models": ["m"], "engine": "sim"},
                endpoint("r", replica, "m"),
            ],
            "router": {
                "prefix": {"enabled": False},
                "default_profile": "round_robin",
                "timeouts": {"response_header": "1s"},
                "scrape_interval": "200ms",
                "scrape_timeout": "200ms",
                "stale_after": "1s",
            },
        }
    )


def test_a_silent_replica_is_left_for_another_after_response_header(
    silent: str, replica: SimEngineProcess
) -> None:
    gw = _silent_and_healthy(silent, replica)
    try:
        for _ in range(2):
            response = httpx.post(gw.base_url + "/chat/completions", json=CHAT, timeout=20)
            assert response.status_code == 200
            assert response.headers["x-llmgw-replica"] == "r"
        metrics = httpx.get(gw.admin_url + "/metrics", timeout=5).text
        assert 'llmgw_upstream_failures_total{endpoint="w",reason="header_timeout"} 1.0' in metrics
    finally:
        gw.stop()


def test_a_silent_replica_alone_is_a_504_naming_response_header_and_is_logged(silent: str) -> None:
    gw = _start(
        {
            "endpoints": [{"id": "w", "url": silent, "models": ["m"], "engine": "sim"}],
            "router": {"timeouts": {"response_header": "1s"}, "stale_after": "1s"},
        }
    )
    try:
        response = httpx.post(gw.base_url + "/chat/completions", json=CHAT, timeout=20)
        assert response.status_code == 504
        assert "router.timeouts.response_header" in response.json()["error"]["message"]
        log = gw.log()
        assert (
            "replica w of model 'm' failed in its response headers (router.timeouts.response_header)" in log
        )
        assert "attempt 1 of 3" in log
        assert "the request failed" in log
    finally:
        gw.stop()


def test_a_slow_replica_answering_its_metrics_is_waited_for_past_response_header() -> None:
    slow = sim("--model", "m", "--decode-ms", "100")  # 30 tokens: about 3 s
    gw = _start(
        {
            "endpoints": [endpoint("s", slow, "m")],
            "router": {
                "timeouts": {"response_header": "1s"},
                "scrape_interval": "200ms",
                "stale_after": "2s",
            },
        }
    )
    try:
        response = httpx.post(gw.base_url + "/chat/completions", json={**CHAT, "max_tokens": 30}, timeout=30)
        assert response.status_code == 200
        assert response.json()["usage"]["completion_tokens"] == 30
    finally:
        gw.stop()
        slow.stop()
