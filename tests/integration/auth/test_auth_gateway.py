"""Auth on the client port, end to end: `llmgw server` with `auth.enabled` in front of a
sim engine, tenancy and keys made through its own admin API on `admin_listen`, and
OpenAI-shaped requests with those keys through real sockets.

Covers what a client sees: 401 without a valid key, 404 for a model its key may not
use (also missing from /v1/models), 429 with Retry-After and x-ratelimit-* headers at
its RPM, 429 insufficient_quota once a budget is spent, the band of its project
applied by admission, and a usage record per request in the store.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from llmgw.testing.server import GatewayProcess, running_gateway
from llmgw.testing.sim import SimEngineProcess
from support.sims import endpoint, sim

CHAT = {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 4}
WAIT_S = 15.0


class Deployment:
    """The gateway, and calls to its client port and admin API."""

    def __init__(self, gateway: GatewayProcess) -> None:
        self.gateway = gateway
        self.admin_token = gateway.admin_token()
        self.client = httpx.Client(timeout=10)

    def admin(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        answer = self.client.request(
            method,
            self.gateway.admin_url + path,
            json=body,
            headers={"authorization": f"Bearer {self.admin_token}"},
        )
        assert answer.status_code < 300, answer.text
        data: dict[str, Any] = answer.json()
        return data

    def project(self, name: str, **fields: Any) -> str:
        """A project in its own org and team; returns a new key for it."""
        self.admin("POST", "/api/orgs", {"id": f"{name}-org"})
        self.admin("POST", "/api/teams", {"id": f"{name}-team", "org": f"{name}-org"})
        self.admin("POST", "/api/projects", {"id": name, "team": f"{name}-team", **fields})
        key: str = self.admin("POST", "/api/keys", {"project": name})["key"]
        return key

    def chat(self, key: str | None, model: str = "chat-a", **headers: str) -> httpx.Response:
        sent = dict(headers)
        if key is not None:
            sent["authorization"] = f"Bearer {key}"
        return self.client.post(
            self.gateway.base_url + "/chat/completions", json={"model": model, **CHAT}, headers=sent
        )

    def metrics(self) -> str:
        return self.client.get(self.gateway.admin_url + "/metrics").text


@pytest.fixture(scope="module")
def engine() -> Iterator[SimEngineProcess]:
    process = sim("--model", "chat-a", "--model", "chat-b")
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def deployment(engine: SimEngineProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    store = tmp_path_factory.mktemp("auth-gateway") / "llmgw.db"
    config = {
        "auth": {
            "enabled": True,
            "store": str(store),
            "flush_interval": "100ms",
            "pricing": {"chat-a": {"prompt_per_1k": 1_000_000, "completion_per_1k": 1_000_000}},
        },
        "endpoints": [endpoint("sim-1", engine, "chat-a", "chat-b")],
    }
    with running_gateway(config) as gateway:
        deployment = Deployment(gateway)
        try:
            yield deployment
        finally:
            deployment.client.close()


def _error(answer: httpx.Response) -> dict[str, Any]:
    error: dict[str, Any] = answer.json()["error"]
    return error


def test_a_request_without_a_valid_key_is_401(deployment: Deployment) -> None:
    missing = deployment.chat(None)
    assert missing.status_code == 401
    assert _error(missing)["code"] == "missing_api_key"
    for bad in ("not-a-key", "llmgw-abcdefgh-" + "x" * 40):
        refused = deployment.chat(bad)
        assert refused.status_code == 401
        assert _error(refused)["code"] == "invalid_api_key"
    listing = deployment.client.get(deployment.gateway.base_url + "/models")
    assert listing.status_code == 401


def test_a_model_the_key_may_not_use_does_not_exist_for_it(deployment: Deployment) -> None:
    key = deployment.project("narrow", allowed_models=["chat-a"])
    assert deployment.chat(key, "chat-a").status_code == 200
    hidden = deployment.chat(key, "chat-b")
    assert hidden.status_code == 404
    assert _error(hidden)["code"] == "model_not_found"
    auth = {"authorization": f"Bearer {key}"}
    listed = deployment.client.get(deployment.gateway.base_url + "/models", headers=auth).json()
    assert [entry["id"] for entry in listed["data"]] == ["chat-a"]
    one = deployment.client.get(deployment.gateway.base_url + "/models/chat-b", headers=auth)
    assert one.status_code == 404


def test_requests_past_the_projects_rpm_are_429_with_openai_headers(deployment: Deployment) -> None:
    key = deployment.project("slow", rpm=2)
    answers = [deployment.chat(key) for _ in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 429]
    refused = answers[2]
    assert _error(refused)["code"] == "rate_limit_exceeded"
    assert int(refused.headers["retry-after"]) >= 1
    assert refused.headers["x-ratelimit-limit-requests"] == "2"
    assert refused.headers["x-ratelimit-remaining-requests"] == "0"
    assert "x-ratelimit-reset-requests" in refused.headers


def test_a_spent_budget_is_429_insufficient_quota(deployment: Deployment) -> None:
    # chat-a costs one unit per token here, so the first answer spends the budget.
    key = deployment.project("thrifty", budget=1, budget_period="day")
    assert deployment.chat(key).status_code == 200
    deadline = time.monotonic() + WAIT_S
    while True:
        answer = deployment.chat(key)
        if answer.status_code == 429:
            break
        assert answer.status_code == 200, answer.text
        assert time.monotonic() < deadline, "the spent budget was never enforced"
        time.sleep(0.2)
    assert _error(answer)["code"] == "insufficient_quota"
    assert int(answer.headers["retry-after"]) >= 1
    # A budget nobody set refuses nothing: chat-b costs nothing and no other level has one.
    assert deployment.chat(deployment.project("free")).status_code == 200


def test_the_projects_band_is_the_requests_admission_band(deployment: Deployment) -> None:
    key = deployment.project("batch", band="bronze")
    # Asking for a better band in the header is ignored with auth on.
    assert deployment.chat(key, **{"x-llmgw-band": "platinum"}).status_code == 200
    admitted = [
        line
        for line in deployment.metrics().splitlines()
        if line.startswith("llmgw_admission_admitted_total") and 'band="bronze"' in line
    ]
    assert admitted
    assert float(admitted[0].rsplit(" ", 1)[1]) >= 1
    assert 'band="platinum"' not in deployment.metrics()


def test_each_request_leaves_a_usage_record(deployment: Deployment) -> None:
    key = deployment.project("counted")
    answer = deployment.chat(key, **{"x-llmgw-tags": "run=nightly"})
    assert answer.status_code == 200
    request_id = answer.headers["x-request-id"]
    deadline = time.monotonic() + WAIT_S
    while True:
        records = deployment.admin("GET", "/api/usage/records?limit=100&since=1h")["data"]
        mine = [r for r in records if r.get("request_id") == request_id]
        if mine:
            break
        assert time.monotonic() < deadline, "the usage record was never written"
        time.sleep(0.1)
    record = mine[0]
    assert record["project_id"] == "counted"
    assert record["model"] == "chat-a"
    assert record["replica"] == "sim-1"
    assert record["status"] == 200
    assert record["completion_tokens"] > 0
    assert record["tags"] == {"run": "nightly"}


def test_the_cli_talks_to_the_servers_admin_api(deployment: Deployment) -> None:
    made = subprocess.run(
        [
            *(sys.executable, "-m", "llmgw", "keys"),
            *("--admin", deployment.gateway.admin_url, "--token", deployment.admin_token),
            *("create", "--project", "counted"),
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    key = next(line for line in made.stdout.splitlines() if line.startswith("llmgw-"))
    assert deployment.chat(key).status_code == 200


def test_auth_settings_are_checked_before_serving(tmp_path: Path) -> None:
    config = tmp_path / "llmgw.yaml"
    config.write_text(
        "auth:\n  enabled: true\n  store: postgresql://nobody@127.0.0.1:1/none\n"
        "endpoints: [{id: a, url: 'http://127.0.0.1:1', models: [m]}]\n"
    )
    started = subprocess.run(
        [sys.executable, "-m", "llmgw", "server", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert started.returncode == 1
    assert "could not open its store" in started.stderr
    assert "Traceback" not in started.stderr
