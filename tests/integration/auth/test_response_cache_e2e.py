"""The response cache end to end: `llmgw server` with auth in front of a sim, projects
and keys made through its admin API, caching switched on with `llmgw keys cache` as a
subprocess, and requests through real sockets.

A repeated temperature-0 answer comes from the cache (the sim saw one request), a
stream replays the same events, sampling requests are never cached, a project never
gets another's entries, entries expire, and a hit is recorded with no tokens and
charged to no limit."""

from __future__ import annotations

import itertools
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from llmgw.testing.server import GatewayProcess, running_gateway
from llmgw.testing.sim import SimEngineProcess
from support.sims import endpoint, sim, sim_state

WAIT_S = 15.0
_prompts = itertools.count()


class Deployment:
    def __init__(self, gateway: GatewayProcess, engine: SimEngineProcess) -> None:
        self.gateway = gateway
        self.engine = engine
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

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        token_file = self.gateway.config_path.parent / "secrets" / "admin-token"
        connect = ["--admin", self.gateway.admin_url, "--token-file", str(token_file)]
        return subprocess.run(
            [sys.executable, "-m", "llmgw", "keys", *connect, *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def cache(self, project: str, ttl: str) -> None:
        done = self.cli("cache", "--project", project, "--ttl", ttl)
        assert done.returncode == 0, done.stderr

    def chat(self, key: str, body: dict[str, Any]) -> httpx.Response:
        return self.client.post(
            self.gateway.base_url + "/chat/completions",
            json={"model": "chat-a", **body},
            headers={"authorization": f"Bearer {key}"},
        )

    def seen(self) -> int:
        count: int = sim_state(self.engine)["requests_seen"]
        return count

    def record(self, request_id: str) -> dict[str, Any]:
        deadline = time.monotonic() + WAIT_S
        while True:
            records = self.admin("GET", "/api/usage/records?limit=500&since=1h")["data"]
            mine = [r for r in records if r.get("request_id") == request_id]
            if mine:
                found: dict[str, Any] = mine[0]
                return found
            assert time.monotonic() < deadline, f"no usage record for {request_id}"
            time.sleep(0.1)


def _asked(temperature: float = 0, **extra: Any) -> dict[str, Any]:
    """A body no other test sends (its own prompt)."""
    text = f"tell me about case {next(_prompts)}"
    return {
        "messages": [{"role": "user", "content": text}],
        "max_tokens": 6,
        "temperature": temperature,
        **extra,
    }


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    engine = sim("--model", "chat-a")
    try:
        store = tmp_path_factory.mktemp("response-cache") / "llmgw.db"
        config = {
            "auth": {"enabled": True, "store": str(store), "flush_interval": "100ms"},
            "router": {"cache": {"max_bytes": 4 << 20, "max_entry_bytes": 1 << 20}},
            "endpoints": [endpoint("sim-1", engine, "chat-a")],
        }
        with running_gateway(config) as gateway:
            deployment = Deployment(gateway, engine)
            try:
                yield deployment
            finally:
                deployment.client.close()
    finally:
        engine.stop()


def test_a_repeated_temperature_0_request_is_answered_from_the_cache(deployment: Deployment) -> None:
    key = deployment.project("cached")
    deployment.cache("cached", "10m")
    body = _asked()
    before = deployment.seen()
    first = deployment.chat(key, body)
    assert first.status_code == 200, first.text
    assert first.headers["x-llmgw-cache"] == "miss"
    # Fields that change no answer do not make it another request.
    second = deployment.chat(key, {**body, "user": "someone else", "metadata": {"run": "b"}})
    assert second.status_code == 200
    assert second.headers["x-llmgw-cache"] == "hit"
    assert second.headers["x-llmgw-model"] == "chat-a"
    assert second.json() == first.json()
    assert deployment.seen() == before + 1
    page = deployment.client.get(deployment.gateway.admin_url + "/metrics").text
    assert "llmgw_response_cache_hits_total" in page
    assert "llmgw_response_cache_bytes" in page


def test_a_streamed_hit_replays_the_stream(deployment: Deployment) -> None:
    key = deployment.project("streams")
    deployment.cache("streams", "10m")
    body = _asked(stream=True)
    before = deployment.seen()
    answers = []
    for expected in ("miss", "hit"):
        with deployment.client.stream(
            "POST",
            deployment.gateway.base_url + "/chat/completions",
            json={"model": "chat-a", **body},
            headers={"authorization": f"Bearer {key}"},
        ) as answer:
            assert answer.status_code == 200
            assert answer.headers["x-llmgw-cache"] == expected
            assert answer.headers["content-type"].startswith("text/event-stream")
            answers.append(answer.read())
    assert answers[0] == answers[1]
    assert answers[1].rstrip().endswith(b"data: [DONE]")
    assert deployment.seen() == before + 1
    # The same request unstreamed is another shape: not the stream's entry.
    plain = deployment.chat(key, {**body, "stream": False})
    assert plain.headers["x-llmgw-cache"] == "miss"
    assert plain.json()["object"] == "chat.completion"


def test_sampling_requests_are_never_cached(deployment: Deployment) -> None:
    key = deployment.project("sampling")
    deployment.cache("sampling", "10m")
    body = _asked(temperature=0.7)
    before = deployment.seen()
    for _ in range(2):
        answer = deployment.chat(key, body)
        assert answer.status_code == 200
        assert "x-llmgw-cache" not in answer.headers
    assert deployment.seen() == before + 2
    seeded = _asked(temperature=0.7, seed=11)
    assert deployment.chat(key, seeded).headers["x-llmgw-cache"] == "miss"
    assert deployment.chat(key, seeded).headers["x-llmgw-cache"] == "hit"


def test_a_project_never_gets_another_projects_entry(deployment: Deployment) -> None:
    first_key = deployment.project("first")
    other_key = deployment.project("other")
    unset_key = deployment.project("unset")
    deployment.cache("first", "10m")
    deployment.cache("other", "10m")
    body = _asked()
    assert deployment.chat(first_key, body).headers["x-llmgw-cache"] == "miss"
    assert deployment.chat(first_key, body).headers["x-llmgw-cache"] == "hit"
    before = deployment.seen()
    assert deployment.chat(other_key, body).headers["x-llmgw-cache"] == "miss"
    # A project that never switched caching on is not cached at all.
    assert "x-llmgw-cache" not in deployment.chat(unset_key, body).headers
    assert deployment.seen() == before + 2
    done = deployment.cli("cache", "--project", "first", "--off")
    assert done.returncode == 0, done.stderr
    assert "x-llmgw-cache" not in deployment.chat(first_key, body).headers


def test_an_entry_expires_with_its_projects_lifetime(deployment: Deployment) -> None:
    key = deployment.project("brief")
    deployment.cache("brief", "1s")
    body = _asked()
    assert deployment.chat(key, body).headers["x-llmgw-cache"] == "miss"
    assert deployment.chat(key, body).headers["x-llmgw-cache"] == "hit"
    deadline = time.monotonic() + WAIT_S
    while deployment.chat(key, body).headers["x-llmgw-cache"] == "hit":
        assert time.monotonic() < deadline, "the entry never expired"
        time.sleep(0.2)
    assert deployment.chat(key, body).headers["x-llmgw-cache"] == "hit"  # kept again


def test_a_hit_is_marked_in_its_usage_record_and_charged_nothing(deployment: Deployment) -> None:
    # Two requests a minute: the hits after the first answer would be refused if counted.
    key = deployment.project("frugal", rpm=2)
    deployment.cache("frugal", "10m")
    body = _asked()
    first = deployment.chat(key, body)
    assert first.headers["x-llmgw-cache"] == "miss"
    hits = [deployment.chat(key, body) for _ in range(4)]
    assert [h.status_code for h in hits] == [200] * 4
    assert all(h.headers["x-llmgw-cache"] == "hit" for h in hits)
    missed = deployment.record(first.headers["x-request-id"])
    assert missed["completion_tokens"] > 0
    assert "llmgw.cache" not in (missed["tags"] or {})
    hit = deployment.record(hits[0].headers["x-request-id"])
    assert (hit["project_id"], hit["replica"], hit["status"]) == ("frugal", "cache", 200)
    assert (hit["prompt_tokens"], hit["completion_tokens"], hit["cost_micros"]) == (0, 0, 0)
    assert hit["tags"] == {"llmgw.cache": "hit"}


def test_embeddings_are_cached_without_a_temperature(deployment: Deployment) -> None:
    key = deployment.project("vectors")
    deployment.cache("vectors", "10m")
    body = {"model": "chat-a", "input": [f"embed case {next(_prompts)}"]}
    answers = [
        deployment.client.post(
            deployment.gateway.base_url + "/embeddings", json=body, headers={"authorization": f"Bearer {key}"}
        )
        for _ in range(2)
    ]
    assert [a.status_code for a in answers] == [200, 200], answers[0].text
    assert [a.headers["x-llmgw-cache"] for a in answers] == ["miss", "hit"]
    assert answers[1].json() == answers[0].json()
    # The sim counts no embeddings among its requests: the record says who answered.
    assert deployment.record(answers[0].headers["x-request-id"])["replica"] == "sim-1"
    assert deployment.record(answers[1].headers["x-request-id"])["replica"] == "cache"


def test_the_cli_refuses_neither_or_both_of_ttl_and_off(deployment: Deployment) -> None:
    for args in ((), ("--ttl", "1m", "--off")):
        done = deployment.cli("cache", "--project", "cached", *args)
        assert done.returncode == 2
        assert "--ttl" in done.stderr
        assert "Traceback" not in done.stderr
    bad = deployment.cli("cache", "--project", "cached", "--ttl", "soon")
    assert bad.returncode == 2
    assert "--ttl" in bad.stderr


def test_the_admin_api_sets_and_shows_a_projects_cache_lifetime(deployment: Deployment) -> None:
    deployment.project("shown")
    assert deployment.admin("GET", "/api/projects/shown")["cache_ttl"] is None
    assert deployment.admin("PUT", "/api/cache/project/shown", {"ttl": "90s"})["cache_ttl"] == "1m30s"
    assert deployment.admin("GET", "/api/projects/shown")["cache_ttl"] == "1m30s"
    assert deployment.admin("PUT", "/api/cache/project/shown", {"ttl": None})["cache_ttl"] is None
    headers = {"authorization": f"Bearer {deployment.admin_token}"}
    url = deployment.gateway.admin_url + "/api/cache"
    team = deployment.client.put(url + "/team/shown-team", json={"ttl": "1m"}, headers=headers)
    assert team.status_code == 400
    assert "per project" in team.json()["error"]["message"]
    missing = deployment.client.put(url + "/project/nowhere", json={"ttl": "1m"}, headers=headers)
    assert missing.status_code == 404
