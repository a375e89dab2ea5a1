"""The gateway's own answers, end to end through `llmgw server` (auth on) and sim
engines: every status it makes itself carries x-request-id and is counted in
llmgw_requests_total under a reason; the /metrics page has each family once; a replica
refusing the gateway's engine key is a 502 for the client, leaves routing at once and
shows in `llmgw ctl replicas`; CORS for browser clients on an allowed origin only.
Requests the HTTP server refuses before the application sees them (not HTTP, a head too
large, bodies past the memory budget, a body that never came) and answers that are no refusal (the model list,
health) are counted too, each under its route."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from llmgw.testing.server import GatewayProcess, free_port, running_gateway
from llmgw.testing.sim import SimEngineProcess
from support.sims import endpoint, sim

ENGINE_KEY = "engine-secret-abc123"
ALLOWED = "https://chat.example.com"
CHAT: dict[str, Any] = {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 3}
Reasons = Counter[tuple[str, str, str, str]]


class Deployment:
    def __init__(self, gateway: GatewayProcess) -> None:
        self.gateway = gateway
        self.port = int(urlsplit(gateway.url).port or 0)
        self.token = gateway.admin_token()
        self.http = httpx.Client(timeout=10)

    def admin(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        answer = self.http.request(
            method,
            self.gateway.admin_url + path,
            json=body,
            headers={"authorization": f"Bearer {self.token}"},
        )
        assert answer.status_code < 300, answer.text
        return answer.json()

    def key(self, name: str, **fields: Any) -> str:
        self.admin("POST", "/api/orgs", {"id": f"{name}-org"})
        self.admin("POST", "/api/teams", {"id": f"{name}-team", "org": f"{name}-org"})
        self.admin("POST", "/api/projects", {"id": name, "team": f"{name}-team", **fields})
        key: str = self.admin("POST", "/api/keys", {"project": name})["key"]
        return key

    def chat(self, key: str | None, model: str, **headers: str) -> httpx.Response:
        if key is not None:
            headers["authorization"] = f"Bearer {key}"
        return self.http.post(
            self.gateway.base_url + "/chat/completions", json={"model": model, **CHAT}, headers=headers
        )

    def metrics(self) -> str:
        return self.http.get(self.gateway.admin_url + "/metrics").text

    def ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        command = [
            sys.executable,
            "-m",
            "llmgw",
            "ctl",
            "--admin",
            self.gateway.admin_url,
            "--token",
            self.token,
        ]
        return subprocess.run([*command, *args], capture_output=True, text=True, timeout=60, check=False)


@pytest.fixture(scope="module")
def engines() -> Iterator[tuple[SimEngineProcess, SimEngineProcess]]:
    # "locked" wants a key the gateway is not given: it refuses every request with 401.
    locked = sim("--model", "m", "--model", "solo", "--api-key", ENGINE_KEY)
    good = sim("--model", "m", "--model", "free", "--model", "pair")
    try:
        yield locked, good
    finally:
        locked.stop()
        good.stop()


@pytest.fixture(scope="module")
def deployment(
    engines: tuple[SimEngineProcess, SimEngineProcess], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    locked, good = engines
    config = {
        "auth": {"enabled": True, "store": str(tmp_path_factory.mktemp("errors") / "llmgw.db")},
        "endpoints": [
            endpoint("locked", locked, "m", "solo"),
            endpoint("good", good, "m", "free", "pair"),
            endpoint("locked-2", locked, "pair"),
            # Nothing listens there: every try fails, so the client gets 503.
            {"id": "down", "url": f"http://127.0.0.1:{free_port()}", "models": ["gone"], "engine": "sim"},
        ],
        "router": {
            # Two large bodies at once pass the memory budget; one over max_body_bytes is 413.
            "max_body_bytes": 100_000,
            "max_body_memory_bytes": 150_000,
            # A body that never comes is refused 408 after a second.
            "timeouts": {"body": "1s"},
            "failure_threshold": 3,
            "cooldown": "10m",
            "default_profile": "round_robin",
            "cors": {"origins": [ALLOWED]},
        },
    }
    with running_gateway(config, timeout=90) as gateway:
        made = Deployment(gateway)
        try:
            yield made
        finally:
            made.http.close()


def requests_by_reason(page: str) -> Reasons:
    counts: Reasons = Counter()
    for family in text_string_to_metric_families(page):
        for s in family.samples:
            if s.name == "llmgw_requests_total":
                labels = s.labels
                counts[(labels["route"], labels["status"], labels["reason"], labels["model"])] += int(s.value)
    return counts


def assert_openai_error(answer: httpx.Response, status: int) -> dict[str, Any]:
    assert answer.status_code == status, answer.text
    assert answer.headers["x-request-id"]
    error: dict[str, Any] = answer.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    return error


def test_every_status_the_gateway_makes_has_a_request_id_and_is_counted(deployment: Deployment) -> None:
    d = deployment
    before = requests_by_reason(d.metrics())
    key = d.key("errors", rpm=2)
    url = d.gateway.base_url + "/chat/completions"
    auth = {"authorization": f"Bearer {key}", "content-type": "application/json"}
    assert_openai_error(d.http.post(url, content=b"{not json", headers=auth), 400)
    assert_openai_error(d.chat(None, "free"), 401)
    assert_openai_error(d.chat(key, "no-such-model"), 404)
    assert_openai_error(d.http.get(d.gateway.base_url + "/nothing"), 404)
    wrong_method = d.http.get(url, headers=auth)
    assert_openai_error(wrong_method, 405)
    assert wrong_method.headers["allow"] == "POST"
    assert d.http.put(d.gateway.base_url + "/models", headers=auth).headers["allow"] == "GET"
    assert_openai_error(d.http.post(url, content=b"x" * 120_000, headers=auth), 413)
    assert_openai_error(d.chat(key, "gone"), 503)
    assert d.chat(key, "free").status_code == 200
    assert_openai_error(d.chat(key, "free"), 429)  # the project's rpm of 2 is spent
    assert d.http.get(d.gateway.base_url + "/models", headers=auth).status_code == 200
    assert d.http.get(d.gateway.base_url + "/models/free", headers=auth).status_code == 200
    assert d.http.get(d.gateway.url + "/health").status_code == 200

    after = requests_by_reason(d.metrics())
    counted = after - before
    chat = "/v1/chat/completions"
    assert counted[(chat, "400", "bad_request", "")] == 1
    assert counted[(chat, "401", "unauthorized", "")] == 1
    assert counted[(chat, "404", "not_found", "")] == 1
    assert counted[("other", "404", "not_found", "")] == 1
    assert counted[(chat, "405", "method_not_allowed", "")] == 1
    assert counted[("/v1/models", "405", "method_not_allowed", "")] == 1
    assert counted[(chat, "413", "body_too_large", "")] == 1
    assert counted[(chat, "503", "upstream_error", "gone")] == 1
    assert counted[(chat, "200", "", "free")] == 1
    assert counted[(chat, "429", "rate_limited", "free")] == 1
    assert counted[("/v1/models", "200", "", "")] == 1
    assert counted[("/v1/models/{model}", "200", "", "")] == 1
    assert counted[("/health", "200", "", "")] == 1


def raw_exchange(d: Deployment, data: bytes) -> bytes:
    """Sends `data` on a fresh connection to the client port; the response that comes back."""
    with socket.create_connection(("127.0.0.1", d.port), timeout=10) as sock:
        sock.sendall(data)
        return read_response(sock)


def read_response(sock: socket.socket) -> bytes:
    """One response: its head, and as much body as its content-length says."""
    received = b""
    while b"\r\n\r\n" not in received:
        part = sock.recv(65536)
        assert part, f"the connection closed before a whole head: {received!r}"
        received += part
    head, _, body = received.partition(b"\r\n\r\n")
    fields = dict(line.split(b":", 1) for line in head.split(b"\r\n")[1:])
    length = int({name.lower(): value for name, value in fields.items()}[b"content-length"])
    while len(body) < length:
        part = sock.recv(65536)
        assert part, "the connection closed before the whole body"
        body += part
    return head + b"\r\n\r\n" + body


def test_what_the_http_server_refuses_itself_is_counted(deployment: Deployment) -> None:
    d = deployment
    before = requests_by_reason(d.metrics())
    assert raw_exchange(d, b"NOT HTTP AT ALL\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    huge_head = b"GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n"
    assert raw_exchange(d, huge_head).startswith(b"HTTP/1.1 431 ")
    key = d.key("bodies")
    head = (
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {key}\r\nContent-Length: 100000\r\n\r\n"
    ).encode()
    # One large body on its way holds 100 000 of the 150 000 bytes of the budget...
    with socket.create_connection(("127.0.0.1", d.port), timeout=10) as holder:
        holder.sendall(head + b'{"model": ')
        # ...so a second one is refused before the application sees it.
        refused = raw_exchange(d, head)
    assert refused.startswith(b"HTTP/1.1 503 "), refused[:200]
    assert b"body_memory_full" in refused
    late = (
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {key}\r\nContent-Length: 50\r\n\r\n"
    ).encode()
    assert raw_exchange(d, late).startswith(b"HTTP/1.1 408 ")  # the body never came

    counted = requests_by_reason(d.metrics()) - before
    assert counted[("", "400", "bad_http", "")] == 1
    assert counted[("", "431", "bad_http", "")] == 1
    assert counted[("", "503", "body_memory_full", "")] == 1
    assert counted[("", "408", "body_timeout", "")] == 1


def test_a_sane_client_request_id_is_kept_and_any_other_replaced(deployment: Deployment) -> None:
    d = deployment
    kept = d.chat(None, "free", **{"x-request-id": "client-7f3a.9:b/c"})
    assert kept.status_code == 401
    assert kept.headers["x-request-id"] == "client-7f3a.9:b/c"
    for odd in ("has spaces in it", "x" * 200, 'quote"d'):
        replaced = d.chat(None, "free", **{"x-request-id": odd})
        assert replaced.headers["x-request-id"] not in ("", odd)
    minted = {d.chat(None, "free").headers["x-request-id"] for _ in range(3)}
    assert len(minted) == 3


def test_the_metrics_page_has_each_family_once_with_help_and_type(deployment: Deployment) -> None:
    d = deployment
    d.chat(None, "free")  # a refusal, so the auth and request families have samples
    page = d.metrics()
    families = list(text_string_to_metric_families(page))
    names = Counter(family.name for family in families)
    assert [name for name, n in names.items() if n > 1] == []
    helps = Counter(line.split()[2] for line in page.splitlines() if line.startswith("# HELP "))
    types = Counter(line.split()[2] for line in page.splitlines() if line.startswith("# TYPE "))
    assert [name for name, n in helps.items() if n > 1] == []
    assert [name for name, n in types.items() if n > 1] == []
    for family in families:
        assert family.documentation, family.name
        assert family.type != "unknown", family.name
    assert "llmgw_usage_records_dropped" in names  # the auth store's buffer
    assert "llmgw_usage_queue_dropped" in names  # the gateway's accounting queue


def test_a_replica_refusing_the_gateways_key_is_a_502_and_leaves_routing(deployment: Deployment) -> None:
    d = deployment
    key = d.key("keyless")
    refused = d.chat(key, "solo")  # only "locked" serves it
    error = assert_openai_error(refused, 502)
    assert error["code"] == "upstream_auth"
    assert error["type"] == "upstream_error"
    assert "valid API key" not in refused.text
    assert ENGINE_KEY not in refused.text
    # Tripped at once: "m" is served by the other replica from the next request on.
    for _ in range(3):
        answer = d.chat(key, "m")
        assert answer.status_code == 200, answer.text
        assert answer.headers["x-llmgw-replica"] == "good"
    assert 'llmgw_endpoint_breaker_open{endpoint="locked"} 1.0' in d.metrics()

    listed = d.ctl("replicas", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {row["id"]: row for row in orjson.loads(listed.stdout)}
    assert rows["locked"]["routing"] == "open"
    assert "401" in rows["locked"]["last_error"]
    assert rows["good"]["routing"] == "closed"
    assert rows["good"]["last_error"] is None
    table = d.ctl("replicas")
    assert table.returncode == 0, table.stderr
    assert "open" in table.stdout
    assert "401" in table.stdout

    log = d.gateway.log()
    assert "replica locked" in log
    assert ENGINE_KEY not in log


def test_a_try_refused_for_the_engine_key_is_retried_on_another_replica(deployment: Deployment) -> None:
    d = deployment
    key = d.key("pairs")
    # Round robin over "pair"'s two replicas: one of the first two requests goes to
    # locked-2 first, is refused, and is answered by "good" all the same.
    for _ in range(4):
        answer = d.chat(key, "pair")
        assert answer.status_code == 200, answer.text
        assert answer.headers["x-llmgw-replica"] == "good"
    failures = {
        s.labels["endpoint"]: s.value
        for family in text_string_to_metric_families(d.metrics())
        for s in family.samples
        if s.name == "llmgw_upstream_failures_total"
    }
    assert failures["locked-2"] == 1  # tried once, then out of routing at once


def test_cors_preflight_and_answers_for_an_allowed_origin_only(deployment: Deployment) -> None:
    d = deployment
    url = d.gateway.base_url + "/chat/completions"
    asks = {
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization, content-type",
    }
    preflight = d.http.options(url, headers={"origin": ALLOWED, **asks})
    assert preflight.status_code == 204
    assert preflight.headers["access-control-allow-origin"] == ALLOWED
    assert preflight.headers["access-control-allow-methods"] == "POST"
    assert preflight.headers["access-control-allow-headers"] == "authorization, content-type"
    assert int(preflight.headers["access-control-max-age"]) == 600
    assert "Origin" in preflight.headers["vary"]

    stranger = d.http.options(url, headers={"origin": "https://evil.example.com", **asks})
    assert stranger.status_code == 403
    assert not [h for h in stranger.headers if h.startswith("access-control-")]

    key = d.key("browser")
    answered = d.chat(key, "free", origin=ALLOWED)
    assert answered.status_code == 200
    assert answered.headers["access-control-allow-origin"] == ALLOWED
    assert answered.headers["vary"] == "Origin"
    assert "x-request-id" in answered.headers["access-control-expose-headers"]
    refused = d.chat(None, "free", origin=ALLOWED)
    assert refused.status_code == 401
    assert refused.headers["access-control-allow-origin"] == ALLOWED
    streamed_body = {"model": "free", "stream": True, **CHAT}
    with d.http.stream(
        "POST", url, json=streamed_body, headers={"origin": ALLOWED, "authorization": f"Bearer {key}"}
    ) as stream:
        assert stream.status_code == 200
        assert stream.headers["access-control-allow-origin"] == ALLOWED
        assert b"[DONE]" in b"".join(stream.iter_bytes())
    other = d.chat(key, "free", origin="https://evil.example.com")
    assert other.status_code == 200
    assert "access-control-allow-origin" not in other.headers
