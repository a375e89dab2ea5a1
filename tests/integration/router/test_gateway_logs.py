"""The gateway's logs, read as an operator reads them: `llmgw server` as a subprocess with
`--log-format json` (or text), requests through real sockets, and every line of its
output parsed. Each answer's x-request-id is found on its access line, refusals the
gateway makes included; no line holds a key or a prompt; with `router.access_log` off
there are no access lines.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import orjson
import pytest

from llmgw.testing.server import GatewayProcess, running_gateway, start_gateway
from llmgw.testing.sim import SimEngineProcess
from support.sims import endpoint, set_fault, sim

PROMPT = "the-secret-prompt-7f3a9c"
"""A prompt no log line may repeat."""
WAIT_S = 15.0
START_S = 60.0
"""How long a gateway may take to be ready: several start at once on a busy machine."""
ACCESS = "llmgw.access"

Line = dict[str, Any]


def json_lines(gateway: GatewayProcess) -> list[Line]:
    """Every line the gateway wrote, each parsed as JSON (a line that is not fails)."""
    lines: list[Line] = []
    for text in gateway.log().splitlines():
        parsed = orjson.loads(text)
        assert isinstance(parsed, dict), text
        lines.append(parsed)
    return lines


def wait_for_line(gateway: GatewayProcess, wanted: Callable[[Line], bool]) -> Line:
    """The first JSON line `wanted` accepts, polled for until WAIT_S (access lines are
    written in batches, off the request path)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        found = [line for line in json_lines(gateway) if wanted(line)]
        if found:
            return found[0]
        assert time.monotonic() < deadline, f"no such line in:\n{gateway.log()}"
        time.sleep(0.05)


def access_line(gateway: GatewayProcess, request_id: str) -> Line:
    return wait_for_line(
        gateway, lambda line: line["logger"] == ACCESS and line.get("request_id") == request_id
    )


def chat(model: str = "chat-a", **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": PROMPT}], "max_tokens": 4, **extra}


def raw_exchange(gateway: GatewayProcess, request: bytes) -> tuple[int, dict[str, str]]:
    """Sends `request` as bytes on a new connection; the answer's status and headers."""
    host, port = gateway.url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=WAIT_S) as sock:
        sock.sendall(request)
        received = b""
        while b"\r\n\r\n" not in received:
            part = sock.recv(65536)
            if not part:
                break
            received += part
    head = received.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    status = int(head[0].split(" ")[1])
    headers = {}
    for field in head[1:]:
        name, _, value = field.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers


Engines = tuple[SimEngineProcess, SimEngineProcess, SimEngineProcess]


@pytest.fixture(scope="module")
def engines() -> Iterator[Engines]:
    """A sim that answers, one that never sends its answer's head, and one that wants an
    engine key the gateway does not have (the gateway's 502)."""
    started = (
        sim("--model", "chat-a"),
        sim("--model", "slow-model"),
        sim("--model", "locked", "--api-key", "k"),
    )
    try:
        set_fault(started[1], "hang-headers")
        yield started
    finally:
        for engine in started:
            engine.stop()


def _config(engines: Engines, **router: Any) -> dict[str, Any]:
    fast, hanging, locked = engines
    return {
        "endpoints": [
            endpoint("sim-a", fast, "chat-a"),
            endpoint("slow", hanging, "slow-model"),
            endpoint("locked", locked, "locked"),
        ],
        "router": {
            "max_body_bytes": 4000,
            "retries": 0,
            "failure_threshold": 1,
            "timeouts": {"response_header": "500ms", "generation": "2s"},
            **router,
        },
    }


@pytest.fixture(scope="module")
def json_gateway(engines: Engines) -> Iterator[GatewayProcess]:
    handle = start_gateway(_config(engines), timeout=START_S, log_level="info", args=("--log-format", "json"))
    try:
        yield handle
    finally:
        handle.stop()


def test_every_line_is_json_and_an_answer_has_its_access_line(json_gateway: GatewayProcess) -> None:
    with httpx.Client(timeout=WAIT_S) as client:
        answer = client.post(json_gateway.base_url + "/chat/completions", json=chat())
        streamed = client.post(json_gateway.base_url + "/chat/completions", json=chat(stream=True))
    assert (answer.status_code, streamed.status_code) == (200, 200)
    line = access_line(json_gateway, answer.headers["x-request-id"])
    assert line["level"] == "info"
    assert line["time"].endswith("Z")
    assert {k: line[k] for k in ("method", "route", "model", "status", "replica", "stream")} == {
        "method": "POST",
        "route": "/v1/chat/completions",
        "model": "chat-a",
        "status": 200,
        "replica": "sim-a",
        "stream": False,
    }
    usage = answer.json()["usage"]
    assert (line["prompt_tokens"], line["completion_tokens"]) == (
        usage["prompt_tokens"],
        usage["completion_tokens"],
    )
    assert line["total_ms"] > 0
    assert line["band"]
    assert line["key_id"] is None  # auth is off
    stream_line = access_line(json_gateway, streamed.headers["x-request-id"])
    assert stream_line["stream"] is True
    assert 0 < stream_line["ttft_ms"] <= stream_line["total_ms"]
    assert PROMPT not in json_gateway.log()


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "reason"),
    [
        ("GET", "/v2/nothing", None, 404, "not_found"),
        ("GET", "/v1/chat/completions", None, 405, "method_not_allowed"),
        ("POST", "/v1/chat/completions", b"{not json", 400, "bad_request"),
        ("POST", "/v1/chat/completions", orjson.dumps(chat(padding="x" * 5000)), 413, "body_too_large"),
        ("POST", "/v1/chat/completions", orjson.dumps(chat("no-such-model")), 404, "not_found"),
        ("POST", "/v1/chat/completions", orjson.dumps(chat("slow-model")), 504, "timeout"),
    ],
)
def test_a_refusal_has_a_request_id_and_an_access_line(
    json_gateway: GatewayProcess, method: str, path: str, body: bytes | None, status: int, reason: str
) -> None:
    answer = httpx.request(
        method,
        json_gateway.url + path,
        content=body,
        headers={"content-type": "application/json"},
        timeout=WAIT_S,
    )
    assert answer.status_code == status
    request_id = answer.headers["x-request-id"]
    line = access_line(json_gateway, request_id)
    assert (line["method"], line["route"], line["status"], line["reason"]) == (method, path, status, reason)


def test_a_locked_replica_is_502_then_503_and_its_failure_line_carries_the_request_id(
    json_gateway: GatewayProcess,
) -> None:
    with httpx.Client(timeout=WAIT_S) as client:
        first = client.post(json_gateway.base_url + "/chat/completions", json=chat("locked"))
        second = client.post(json_gateway.base_url + "/chat/completions", json=chat("locked"))
    assert (first.status_code, second.status_code) == (502, 503)
    first_id, second_id = first.headers["x-request-id"], second.headers["x-request-id"]
    assert first_id != second_id
    assert access_line(json_gateway, first_id)["reason"] == "upstream_error"
    assert access_line(json_gateway, second_id)["status"] == 503
    # A line written while the request was served, by a logger other than the access
    # log's, carries the request's id from the context.
    failure = wait_for_line(
        json_gateway, lambda line: line["logger"] != ACCESS and line.get("request_id") == first_id
    )
    assert failure["level"] == "warning"
    assert "locked" in failure["message"]


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GET /v1/models HTTP/1.1\r\n\r\n", 400),  # no Host
        (b"NOT HTTP AT ALL\r\n\r\n", 400),
        (b"GET /" + b"a" * 10_000 + b" HTTP/1.1\r\nhost: x\r\n\r\n", 414),
        (b"GET / HTTP/1.1\r\nhost: x\r\nx-big: " + b"b" * 70_000 + b"\r\n\r\n", 431),
    ],
)
def test_the_http_servers_own_refusals_carry_a_request_id(
    json_gateway: GatewayProcess, request_bytes: bytes, status: int
) -> None:
    got, headers = raw_exchange(json_gateway, request_bytes)
    assert got == status
    assert len(headers["x-request-id"]) == 16


def test_a_clients_request_id_is_kept(json_gateway: GatewayProcess) -> None:
    answer = httpx.post(
        json_gateway.base_url + "/chat/completions", json=chat(), headers={"x-request-id": "client-abc-123"}
    )
    assert answer.headers["x-request-id"] == "client-abc-123"
    assert access_line(json_gateway, "client-abc-123")["status"] == 200


def test_text_lines_say_key_value_and_access_log_off_writes_none(
    engines: Engines,
) -> None:
    with (
        running_gateway(
            _config(engines), timeout=START_S, log_level="info", args=("--log-format", "text")
        ) as text,
        running_gateway(
            _config(engines, access_log=False),
            timeout=START_S,
            log_level="info",
            args=("--log-format", "json"),
        ) as quiet,
    ):
        with httpx.Client(timeout=WAIT_S) as client:
            answer = client.post(text.base_url + "/chat/completions", json=chat())
            refused = client.get(text.url + "/v2/nothing")
            client.post(quiet.base_url + "/chat/completions", json=chat())
            client.get(quiet.url + "/v2/nothing")
            failed = client.post(quiet.base_url + "/chat/completions", json=chat("locked"))
        wanted = f"request_id={answer.headers['x-request-id']}"
        deadline = time.monotonic() + WAIT_S
        while wanted not in text.log() or f"request_id={refused.headers['x-request-id']}" not in text.log():
            assert time.monotonic() < deadline, text.log()
            time.sleep(0.05)
        line = next(line for line in text.log().splitlines() if wanted in line)
        assert " INFO llmgw.access: POST /v1/chat/completions 200 " in line
        for field in (
            "status=200",
            "model=chat-a",
            "replica=sim-a",
            "route=/v1/chat/completions",
            "stream=false",
        ):
            assert field in line.split(), line
        refusal = next(line for line in text.log().splitlines() if refused.headers["x-request-id"] in line)
        assert {"status=404", "reason=not_found"} <= set(refusal.split())
        # The quiet gateway's failure line shows it logs this request; no access line follows.
        wait_for_line(quiet, lambda line: line.get("request_id") == failed.headers["x-request-id"])
        assert [line for line in json_lines(quiet) if line["logger"] == ACCESS] == []
        assert PROMPT not in text.log() + quiet.log()


@pytest.fixture(scope="module")
def auth_gateway(engines: Engines, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    store = tmp_path_factory.mktemp("logs-auth") / "llmgw.db"
    config = {
        **_config(engines),
        "auth": {"enabled": True, "store": str(store), "flush_interval": "100ms"},
        # The setting alone chooses the format here (no --log-format).
        "log_format": "json",
    }
    handle = start_gateway(config, timeout=START_S, log_level="info")
    try:
        yield handle
    finally:
        handle.stop()


def _key(gateway: GatewayProcess, client: httpx.Client, **project: Any) -> str:
    token = {"authorization": f"Bearer {gateway.admin_token()}"}
    for path, body in (
        ("/api/orgs", {"id": "logs-org"}),
        ("/api/teams", {"id": "logs-team", "org": "logs-org"}),
        ("/api/projects", {"id": "logs", "team": "logs-team", **project}),
    ):
        client.post(gateway.admin_url + path, json=body, headers=token)
    made = client.post(gateway.admin_url + "/api/keys", json={"project": "logs"}, headers=token)
    assert made.status_code < 300, made.text
    key: str = made.json()["key"]
    return key


def test_with_auth_a_line_names_the_key_by_its_id_only(auth_gateway: GatewayProcess) -> None:
    with httpx.Client(timeout=WAIT_S) as client:
        key = _key(auth_gateway, client, rpm=1)
        bearer = {"authorization": f"Bearer {key}"}
        answered = client.post(auth_gateway.base_url + "/chat/completions", json=chat(), headers=bearer)
        limited = client.post(auth_gateway.base_url + "/chat/completions", json=chat(), headers=bearer)
        unknown = client.post(
            auth_gateway.base_url + "/chat/completions", json=chat(), headers={"authorization": "Bearer nope"}
        )
    assert (answered.status_code, limited.status_code, unknown.status_code) == (200, 429, 401)
    line = access_line(auth_gateway, answered.headers["x-request-id"])
    key_id = line["key_id"]
    assert key_id in key
    assert key_id != key
    limit_line = access_line(auth_gateway, limited.headers["x-request-id"])
    assert (limit_line["status"], limit_line["reason"], limit_line["key_id"]) == (429, "rate_limited", key_id)
    refused = access_line(auth_gateway, unknown.headers["x-request-id"])
    assert (refused["status"], refused["reason"], refused.get("key_id")) == (401, "unauthorized", None)
    output = auth_gateway.log()
    secret = key.rsplit("-", 1)[-1]
    assert [text for text in (key, secret, PROMPT) if text in output] == []
